#pragma once
// What the CLI needs to know about the terminal it writes to: whether there is one, how wide it
// is, and whether colours are wanted.
namespace ppsim::cli {

bool is_terminal(int fd);
// $COLUMNS when it is a positive number, else the width of the terminal on `fd` (TIOCGWINSZ), else
// `fallback`.
int terminal_width(int fd, int fallback = 100);
// ANSI colours on `fd`: a terminal, not --no-color, no NO_COLOR in the environment
// (https://no-color.org), and TERM not "dumb".
bool color_wanted(int fd, bool no_color_option);

}  // namespace ppsim::cli
