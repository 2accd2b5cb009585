/*
 * confighelp.c - the --help texts of agentz and agentz exec (see
 * confighelp.h); the options themselves are config.c's.
 */
#include "supervisor/front/confighelp.h"

#include <string.h>

static const char agent_help[] =
    "usage: agentz [options] \"TASK\"          run an agent on a task\n"
    "       agentz exec [options] FILE...    a supervised Python "
    "interpreter, no model\n"
    "                                        ('agentz exec --help')\n"
    "       agentz report JOURNAL [-o FILE]  a run's journal as one "
    "self-contained\n"
    "                                        HTML page ('agentz report "
    "--help')\n"
    "       agentz ctl RUN COMMAND [ARGS]    steer a running run: status, "
    "note TEXT,\n"
    "                                        stop [--now], pause, resume, "
    "kill-cell,\n"
    "                                        budgets OPTIONS, allow|deny "
    "HOST,\n"
    "                                        network, approve|reject ID\n"
    "                                        ('agentz ctl --help')\n"
    "       agentz runs [--json]             list the agent runs on this "
    "host\n"
    "model and run:\n"
    "  --model NAME         the model (AGENTZ_MODEL; default gpt-6-astra)\n"
    "  --base-url URL       API base incl. version (OPENAI_BASE_URL; default\n"
    "                       https://api.openai.com/v1)\n"
    "  --service-tier TIER  sent as service_tier (default auto; '' = not "
    "sent)\n"
    "  --request-timeout S  per model request (default 1800)\n"
    "  --max-output-tokens N  (default 128000)\n"
    "  --max-retries N      HTTP retries per request (default 4)\n"
    "  --outage-patience SECS  then wait out a model outage (unreachable,\n"
    "                       429, 5xx) this long, 1 s to 60 s between tries\n"
    "                       (default 900; 0 = fail at once)\n"
    "  --journal FILE       append every step of the run to FILE "
    "(AGENTZ_JOURNAL)\n"
    "  --resume             continue the run recorded in --journal (TASK "
    "optional;\n"
    "                       a missing or empty journal starts a new run)\n"
    "  --max-restarts N     resumes of one run before it stops (exit 4; "
    "default 10,\n"
    "                       0 = unlimited)\n"
    "  --max-cells N        stop after N cells (exit 4)\n"
    "  --deadline SECS      stop the run after SECS (exit 4)\n"
    "  --max-tokens N       stop once N tokens were used (exit 4)\n"
    "  --max-cost USD       stop once the model calls cost USD (exit 4); "
    "needs a\n"
    "                       price for the model: built in, or --price\n"
    "  --price IN,CACHED,OUT  USD per 1M input, cached input and output "
    "tokens\n"
    "                       of the run's model (overrides the built-in "
    "table)\n"
    "  --max-same-failure N stop when one failure repeats N times "
    "(default 5)\n"
    "  --max-egress-bytes SIZE  stop once SIZE went through the egress "
    "proxy\n"
    "                       (both ways; its connections are cut then; "
    "exit 4)\n"
    "  --max-parallel-calls N  model calls in flight per cell, 1 to "
    "256 (default 8);\n"
    "                       more wait their turn, in order\n";

static const char exec_help[] =
    "usage: agentz exec [options] FILE...\n"
    "  each FILE is one cell, all in one persistent namespace; - reads cells\n"
    "  from stdin, separated by '# %%' lines\n";

static const char worker_help[] =
    "cells and the worker:\n"
    "  --json               stdout is JSON only: an agent run's events, one a\n"
    "                       line (docs/operating.md, \"The event stream\");\n"
    "                       agentz exec: one record per cell\n"
    "  -v, --verbose        more diagnostics\n"
    "  --output-limit SIZE  output kept per cell, head+tail (default 1M)\n"
    "  --cell-timeout SECS  wall-clock limit per cell (default 3600)\n"
    "  --grace SECS         after the interrupt, before the kill "
    "(default 3)\n"
    "  --memory-limit SIZE  worker memory ceiling (default 4G, 0 = none)\n"
    "  --sandbox PROFILE    seccomp profile: off, default, strict\n"
    "  --sandbox-debug      name a blocked syscall instead of failing it\n"
    "  --snapshot WHEN      fork a snapshot before a cell, to roll the\n"
    "                       namespace back if the cell is killed: auto\n"
    "                       (default: every agent cell; exec: after a slow\n"
    "                       cell or in a large namespace), always, never\n"
    "  --pass-env NAME      pass one more variable to the worker\n"
    "  --worker PATH        the agentz-worker executable\n"
    "  --max-frame SIZE     control channel frame limit (default 64M)\n"
    "the worker's world:\n"
    "  --isolation MODE     required, best-effort or off (default required as\n"
    "                       root or under systemd, best-effort otherwise)\n"
    "  --network NET        the worker's network, a namespace of its own\n"
    "                       with only loopback: proxy (agent runs'\n"
    "                       default; exec's with --allow-host) adds the\n"
    "                       supervisor's HTTP(S) proxy, nothing allowed\n"
    "                       unless an entry says; none (exec's default);\n"
    "                       or host (the host's network, loudly)\n"
    "  --allow-host ENTRY   --network proxy: cells may reach ENTRY: a name,\n"
    "                       *.suffix, *, an address or CIDR, each with\n"
    "                       :PORT or not (repeatable; @FILE: one a line);\n"
    "                       loopback, private and link-local addresses\n"
    "                       only when an address or CIDR entry names them\n"
    "  --deny-host ENTRY    never ENTRY (repeatable; wins over allow)\n"
    "  --network-ask        agent runs: an unlisted host waits for the\n"
    "                       operator (agentz ctl RUN approve|reject ID)\n"
    "  --approval-timeout S then it is refused (default 300)\n"
    "  --workspace DIR      the folder cells may write (default the working\n"
    "                       directory); besides it cells see only /usr,\n"
    "                       /lib*, /bin, a filtered /etc, /tmp, /dev, /proc\n"
    "  --workspace-size SIZE\n"
    "                       what the workspace may hold: measured while the\n"
    "                       run lives, the worker's processes killed when it\n"
    "                       grows past SIZE; no file larger (default 0: no\n"
    "                       bound)\n"
    "  --ro-bind SRC[:DST]  show the host's SRC at DST (default SRC) to\n"
    "                       cells, read-only (repeatable)\n"
    "  --bind SRC[:DST]     the same, read-write (repeatable)\n"
    "  --tmp-size SIZE      private /tmp and /dev/shm, each (default 1G)\n"
    "  --mask PATH          make PATH unreadable to cells (repeatable)\n"
    "  --no-default-masks   do not mask the usual secret folders of homes\n"
    "                       (inside what --ro-bind and --bind add)\n"
    "  --writable-git       let cells write .git and make repositories\n"
    "                       (default: read-only; one a cell makes is\n"
    "                       renamed when the run ends)\n";

static const char agent_tail[] =
    "exit status: 0 after quit(), 1 three consecutive failures, 2 usage\n"
    "  error, no API key or a journal that is corrupt, in use, refused or\n"
    "  replaced under the run, 3 the worker cannot start, 4 a hard stop\n"
    "  ended the run, 5 the journal cannot be written (also read-only at\n"
    "  start), 6 the operator stopped it (agentz ctl RUN stop), 130\n"
    "  interrupted\n"
    "environment: OPENAI_API_KEY (also from ./.env or\n"
    "  $CREDENTIALS_DIRECTORY/openai_api_key; only api.openai.com needs it),\n"
    "  OPENAI_BASE_URL, AGENTZ_MODEL,\n"
    "  AGENTZ_JOURNAL, AGENTZ_SECRETS (more variable names to redact, comma-\n"
    "  separated), AGENTZ_RUNTIME_INFO (JSON for RUNTIME_INFO),\n"
    "  NOTIFY_SOCKET and WATCHDOG_USEC (systemd)\n";

static const char exec_tail[] =
    "exit status: 0 every cell succeeded, 1 otherwise, 2 usage error (a\n"
    "  missing or unreadable file runs nothing), 3 the worker cannot start\n";

int
config_is_exec(const char *cmd)
{
	return strcmp(cmd, "agentz exec") == 0;
}

void
config_usage(const char *cmd, FILE *f)
{
	(void)fputs(config_is_exec(cmd) ? exec_help : agent_help, f);
	(void)fputs(worker_help, f);
	(void)fputs(config_is_exec(cmd) ? exec_tail : agent_tail, f);
}
