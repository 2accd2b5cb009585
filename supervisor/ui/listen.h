/*
 * listen.h - the observers of an agent run (agent/observe.h) that the
 * front end registers, in this order: the output gate (show.c: out.h
 * attached to the run's loop and redactor), the --json event stream
 * (agentev.c), the plain log of what the run shows (show.c), the
 * terminal's status bar when stdout is not the event stream's (tui.c)
 * and systemd's notify (notify.c). Each fills o (ctx included) and
 * keeps u, which must outlive the run.
 */
#ifndef AGENTZ_LISTEN_H
#define AGENTZ_LISTEN_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/agent/observe.h"

/* What the listeners show of the operator's options. */
struct ui_opts {
	int json;			/* stdout is the event stream's */
	int verbose;			/* -v: each cell's code, tracebacks */
	/* for the run_start event: the options the run does not keep */
	const char *seccomp;		/* --sandbox */
	const char *isolation_mode;	/* --isolation, NULL: not given */
	size_t output_limit;
};

void ui_gate_observer(struct agent_observer *o);
void ui_events_observer(struct agent_observer *o, const struct ui_opts *u);
void ui_show_observer(struct agent_observer *o, const struct ui_opts *u);
void ui_tui_observer(struct agent_observer *o);
void ui_notify_observer(struct agent_observer *o);

#endif
