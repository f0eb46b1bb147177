// Terminal facts of the CLI (cli/terminal.hpp): $COLUMNS wins when it is a positive number, else
// the terminal's width, else the fallback; colours never for something that is not a terminal.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <string>

#include "terminal.hpp"

namespace {

// Sets an environment variable for one scope, then puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("terminal.columns_else_terminal_else_fallback", "[terminal]") {
  // terminal width: $COLUMNS, else the terminal, else the fallback
  const int not_a_tty = -1;  // no descriptor: TIOCGWINSZ fails
  {
    ScopedEnv env("COLUMNS", "73");
    CHECK(ppsim::cli::terminal_width(not_a_tty) == 73);
  }
  for (const char* bad : {"", "abc", "0", "-5", "80x", "99999999999"}) {
    ScopedEnv env("COLUMNS", bad);
    CHECK(ppsim::cli::terminal_width(not_a_tty, 100) == 100);
    CHECK(ppsim::cli::terminal_width(not_a_tty, 42) == 42);
  }
  ScopedEnv env("COLUMNS", nullptr);
  CHECK(ppsim::cli::terminal_width(not_a_tty, 100) == 100);
}

TEST_CASE("terminal.never_when_terminal_when_turned", "[terminal]") {
  // colours: never when not a terminal or when turned off
  CHECK_FALSE(ppsim::cli::is_terminal(-1));
  CHECK_FALSE(ppsim::cli::color_wanted(-1, false));
  CHECK_FALSE(ppsim::cli::color_wanted(-1, true));
}
