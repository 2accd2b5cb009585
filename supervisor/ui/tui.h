/*
 * tui.h - the terminal status bar (SPEC section 9). On a TTY, output scrolls
 * above a one-line status bar kept on the last row by a scroll region; a
 * spinner and the token counts are redrawn every 0.1 s (one buffer, one
 * write per frame). Not a TTY (systemd, pipes): nothing here does
 * anything, output stays plain lines.
 */
#ifndef AGENTZ_TUI_H
#define AGENTZ_TUI_H

#include <stddef.h>

#include "supervisor/loop/loop.h"

/* Takes over the terminal on fd if it is a TTY. 1 if active, else 0. */
int tui_init(struct loop *l, int fd);
/* Restores the terminal (scroll region, status line). Safe to repeat. */
void tui_end(void);

/* What the bar says: the running cell, the live estimate of the current
 * request (UTF-8 bytes / 4 while it streams), the exact total so far. */
void tui_set_cell(unsigned n, const char *summary);
void tui_set_streaming(size_t delta_bytes);
void tui_set_total(long long tokens);
/* The money spent so far (USD), shown after the tokens; < 0: no price is
 * known, nothing shown (the start). */
void tui_set_cost(double usd);
/* A model outage being waited out ("" or NULL: none), shown in the bar. */
void tui_set_waiting(const char *what);
/* The operator's marks (agentz ctl): paused, notes not yet delivered. */
void tui_set_operator(int paused, unsigned notes);
/* While input() waits for a line the bar is not redrawn. */
void tui_pause(int paused);

#endif
