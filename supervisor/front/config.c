/*
 * config.c - option parsing (see config.h).
 */
#include "supervisor/front/config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proto/proto.h"
#include "supervisor/run/runner.h"

enum {
	OPT_WORKER = 256, OPT_SANDBOX, OPT_SANDBOX_DEBUG, OPT_OUTPUT_LIMIT,
	OPT_MAX_FRAME, OPT_CELL_TIMEOUT, OPT_GRACE, OPT_MEMORY_LIMIT,
	OPT_PASS_ENV, OPT_MODEL, OPT_BASE_URL, OPT_SERVICE_TIER,
	OPT_REQUEST_TIMEOUT, OPT_MAX_OUTPUT_TOKENS, OPT_MAX_RETRIES,
	OPT_JOURNAL, OPT_RESUME, OPT_MAX_CELLS, OPT_DEADLINE, OPT_MAX_TOKENS,
	OPT_MAX_SAME_FAILURE, OPT_ISOLATION, OPT_WORKSPACE, OPT_TMP_SIZE,
	OPT_MASK, OPT_NO_DEFAULT_MASKS, OPT_WRITABLE_GIT,
	OPT_OUTAGE_PATIENCE, OPT_MAX_RESTARTS, OPT_MAX_COST, OPT_PRICE,
	OPT_SNAPSHOT, OPT_MAX_PARALLEL_CALLS
};


static const struct option long_opts[] = {
	{"json", no_argument, NULL, 'j'},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"worker", required_argument, NULL, OPT_WORKER},
	{"sandbox", required_argument, NULL, OPT_SANDBOX},
	{"sandbox-debug", no_argument, NULL, OPT_SANDBOX_DEBUG},
	{"snapshot", required_argument, NULL, OPT_SNAPSHOT},
	{"output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT},
	{"max-frame", required_argument, NULL, OPT_MAX_FRAME},
	{"cell-timeout", required_argument, NULL, OPT_CELL_TIMEOUT},
	{"grace", required_argument, NULL, OPT_GRACE},
	{"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
	{"pass-env", required_argument, NULL, OPT_PASS_ENV},
	{"model", required_argument, NULL, OPT_MODEL},
	{"base-url", required_argument, NULL, OPT_BASE_URL},
	{"service-tier", required_argument, NULL, OPT_SERVICE_TIER},
	{"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
	{"max-output-tokens", required_argument, NULL, OPT_MAX_OUTPUT_TOKENS},
	{"max-retries", required_argument, NULL, OPT_MAX_RETRIES},
	{"outage-patience", required_argument, NULL, OPT_OUTAGE_PATIENCE},
	{"journal", required_argument, NULL, OPT_JOURNAL},
	{"resume", no_argument, NULL, OPT_RESUME},
	{"max-restarts", required_argument, NULL, OPT_MAX_RESTARTS},
	{"max-cells", required_argument, NULL, OPT_MAX_CELLS},
	{"deadline", required_argument, NULL, OPT_DEADLINE},
	{"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
	{"max-cost", required_argument, NULL, OPT_MAX_COST},
	{"price", required_argument, NULL, OPT_PRICE},
	{"max-same-failure", required_argument, NULL, OPT_MAX_SAME_FAILURE},
	{"max-parallel-calls", required_argument, NULL,
	    OPT_MAX_PARALLEL_CALLS},
	{"isolation", required_argument, NULL, OPT_ISOLATION},
	{"workspace", required_argument, NULL, OPT_WORKSPACE},
	{"tmp-size", required_argument, NULL, OPT_TMP_SIZE},
	{"mask", required_argument, NULL, OPT_MASK},
	{"no-default-masks", no_argument, NULL, OPT_NO_DEFAULT_MASKS},
	{"writable-git", no_argument, NULL, OPT_WRITABLE_GIT},
	{NULL, 0, NULL, 0}
};

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
    "                                        budgets OPTIONS "
    "('agentz ctl --help')\n"
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
    "                       line (README, \"The event stream\"); agentz exec:\n"
    "                       one record per cell\n"
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
    "  --workspace DIR      the folder cells may write (default the working\n"
    "                       directory); the rest of / is read-only\n"
    "  --tmp-size SIZE      private /tmp and /dev/shm, each (default 1G)\n"
    "  --mask PATH          make PATH unreadable to cells (repeatable)\n"
    "  --no-default-masks   do not mask the usual secret folders of homes\n"
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

static int
is_exec(const char *cmd)
{
	return strcmp(cmd, "agentz exec") == 0;
}

static void
usage(const char *cmd, FILE *f)
{
	(void)fputs(is_exec(cmd) ? exec_help : agent_help, f);
	(void)fputs(worker_help, f);
	(void)fputs(is_exec(cmd) ? exec_tail : agent_tail, f);
}

int
config_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	double mult = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0 || !isfinite(v))
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1024.0; end++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end != '\0' || v * mult > 1e18)
		return -1;
	*out = (uint64_t)(v * mult);
	return 0;
}

static int
seconds(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno != 0 || end == s || *end != '\0' || !isfinite(*out) ||
	    *out <= 0 ? -1 : 0;
}

static int bad(const char *cmd, const char *opt, const char *val,
    const char *why);

static int
count(const char *cmd, const char *opt, const char *val, long min, long max,
    long *out)
{
	char *end, range[96];

	errno = 0;
	*out = strtol(val, &end, 10);
	if (errno != 0 || end == val || *end != '\0' || *out < min ||
	    *out > max) {
		(void)snprintf(range, sizeof range, "out of range: expected a "
		    "whole number from %ld to %ld", min, max);
		return bad(cmd, opt, val, range);
	}
	return 0;
}

/* --max-cost USD (an optional leading '$') and --price IN,CACHED,OUT. */
static int
money(struct config *c, int ch, const char *val, const char *cmd)
{
	const char *s = val[0] == '$' ? val + 1 : val;
	char *end;

	if (ch == OPT_PRICE) {
		if (price_parse(val, &c->price) < 0)
			return bad(cmd, "--price", val, "expected IN,CACHED,OUT: "
			    "three numbers >= 0, USD per 1M tokens, e.g. "
			    "1.25,0.125,10");
		c->has_price = 1;
		return 0;
	}
	if (!isdigit((unsigned char)*s) && *s != '.')
		return bad(cmd, "--max-cost", val, "expected US dollars > 0, "
		    "e.g. 2.50");
	errno = 0;
	c->max_cost = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(c->max_cost) ||
	    c->max_cost <= 0 || c->max_cost > 1e9)
		return bad(cmd, "--max-cost", val, "expected US dollars > 0, "
		    "e.g. 2.50");
	return 0;
}

static int
budget(struct config *c, int ch, const char *val, const char *cmd)
{
	long n;

	if (ch == OPT_MAX_COST || ch == OPT_PRICE)
		return money(c, ch, val, cmd);
	if (ch == OPT_MAX_TOKENS) {
		if (count(cmd, "--max-tokens", val, 1, LONG_MAX, &n) < 0)
			return -1;
		c->max_tokens = n;
	} else if (ch == OPT_MAX_PARALLEL_CALLS) {
		if (count(cmd, "--max-parallel-calls", val, 1,
		    MAX_PARALLEL_CALLS_MAX, &n) < 0)
			return -1;
		c->max_parallel_calls = (unsigned)n;
	} else if (ch == OPT_MAX_CELLS) {
		if (count(cmd, "--max-cells", val, 1, 1L << 30, &n) < 0)
			return -1;
		c->max_cells = (unsigned)n;
	} else {
		if (count(cmd, "--max-same-failure", val, 1, 1000, &n) < 0)
			return -1;
		c->max_same_failure = (unsigned)n;
	}
	return 0;
}

static int
bad(const char *cmd, const char *opt, const char *val, const char *why)
{
	(void)fprintf(stderr, "%s: invalid %s '%s': %s\n", cmd, opt, val,
	    why);
	return -1;
}

/* Appends s to the NULL-terminated list *v of *n entries. */
static int
list_add(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 2) * sizeof *nv);

	if (nv == NULL)
		return -1;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

static int set_size(const char *cmd, const char *opt, const char *val,
    uint64_t min, uint64_t *out);

static int
world_opt(struct config *c, int ch, const char *cmd)
{
	switch (ch) {
	case OPT_ISOLATION:
		if (strcmp(optarg, "required") && strcmp(optarg, "best-effort") &&
		    strcmp(optarg, "off"))
			return bad(cmd, "--isolation", optarg,
			    "expected required, best-effort or off");
		c->isolation = optarg;
		return 0;
	case OPT_WORKSPACE: c->workspace = optarg; return 0;
	case OPT_TMP_SIZE:
		return set_size(cmd, "--tmp-size", optarg, 1u << 20,
		    &c->tmp_size);
	case OPT_MASK:
		if (optarg[0] == '\0')
			return bad(cmd, "--mask", optarg, "expected a path");
		return list_add(&c->masks, &c->nmasks, optarg);
	case OPT_WRITABLE_GIT:
		c->writable_git = 1;
		return 0;
	default:
		c->no_default_masks = 1;
		return 0;
	}
}

static int
set_size(const char *cmd, const char *opt, const char *val, uint64_t min,
    uint64_t *out)
{
	if (config_size(val, out) < 0)
		return bad(cmd, opt, val, "expected a size like 512K, 64M, 4G");
	if (*out < min && !(min > 0 && *out == 0 && strcmp(opt,
	    "--memory-limit") == 0))
		return bad(cmd, opt, val, "too small");
	return 0;
}

/* --outage-patience SECS: 0 (no waiting) up to a week. */
static int
patience(struct config *c, const char *val, const char *cmd)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno != 0 || end == val || *end != '\0' || !isfinite(v) ||
	    v < 0 || v > 7 * 86400.0)
		return bad(cmd, "--outage-patience", val,
		    "expected seconds, 0 to 604800");
	c->outage_patience = v;
	return 0;
}

static int
one_opt(struct config *c, int ch, const char *cmd)
{
	uint64_t v;

	switch (ch) {
	case 'j': c->json = 1; return 0;
	case 'v': c->verbose++; return 0;
	case OPT_WORKER: c->worker_path = optarg; return 0;
	case OPT_SANDBOX:
		if (strcmp(optarg, "off") && strcmp(optarg, "default") &&
		    strcmp(optarg, "strict"))
			return bad(cmd, "--sandbox", optarg,
			    "expected off, default or strict");
		c->sandbox = optarg;
		return 0;
	case OPT_SANDBOX_DEBUG: c->sandbox_debug = 1; return 0;
	case OPT_SNAPSHOT:
		if (strcmp(optarg, "auto") && strcmp(optarg, "always") &&
		    strcmp(optarg, "never"))
			return bad(cmd, "--snapshot", optarg,
			    "expected auto, always or never");
		c->snapshot = optarg;
		return 0;
	case OPT_OUTPUT_LIMIT:
		if (set_size(cmd, "--output-limit", optarg, 64, &v) < 0)
			return -1;
		c->output_limit = (size_t)v;
		return 0;
	case OPT_MAX_FRAME:
		if (set_size(cmd, "--max-frame", optarg, 4096, &v) < 0)
			return -1;
		c->max_frame = (size_t)v;
		return 0;
	case OPT_MEMORY_LIMIT:
		if (set_size(cmd, "--memory-limit", optarg, 64u << 20,
		    &c->memory_limit) < 0)
			return -1;
		return 0;
	case OPT_CELL_TIMEOUT:
		return seconds(optarg, &c->cell_timeout) < 0 ? bad(cmd,
		    "--cell-timeout", optarg, "expected seconds > 0") : 0;
	case OPT_GRACE:
		return seconds(optarg, &c->grace) < 0 ? bad(cmd, "--grace",
		    optarg, "expected seconds > 0") : 0;
	case OPT_PASS_ENV:
		return list_add(&c->pass_env, &c->npass_env, optarg);
	case OPT_ISOLATION:
	case OPT_WORKSPACE:
	case OPT_TMP_SIZE:
	case OPT_MASK:
	case OPT_NO_DEFAULT_MASKS:
	case OPT_WRITABLE_GIT:
		return world_opt(c, ch, cmd);
	case OPT_MODEL: c->model = optarg; return 0;
	case OPT_JOURNAL: c->journal = optarg; return 0;
	case OPT_RESUME: c->resume = 1; return 0;
	case OPT_MAX_RESTARTS: {
		long n;

		if (count(cmd, "--max-restarts", optarg, 0, 1000000, &n) < 0)
			return -1;
		c->max_restarts = (unsigned)n;
		return 0;
	}
	case OPT_DEADLINE:
		return seconds(optarg, &c->deadline) < 0 ? bad(cmd, "--deadline",
		    optarg, "expected seconds > 0") : 0;
	case OPT_MAX_CELLS:
	case OPT_MAX_TOKENS:
	case OPT_MAX_COST:
	case OPT_PRICE:
	case OPT_MAX_SAME_FAILURE:
	case OPT_MAX_PARALLEL_CALLS:
		return budget(c, ch, optarg, cmd);
	case OPT_BASE_URL: c->base_url = optarg; return 0;
	case OPT_SERVICE_TIER: c->service_tier = optarg; return 0;
	case OPT_REQUEST_TIMEOUT:
		return seconds(optarg, &c->request_timeout) < 0 ? bad(cmd,
		    "--request-timeout", optarg, "expected seconds > 0") : 0;
	case OPT_MAX_OUTPUT_TOKENS:
		return count(cmd, "--max-output-tokens", optarg, 16, 1L << 30,
		    &c->max_output_tokens);
	case OPT_OUTAGE_PATIENCE:
		return patience(c, optarg, cmd);
	case OPT_MAX_RETRIES: {
		long n;

		if (count(cmd, "--max-retries", optarg, 0, 100, &n) < 0)
			return -1;
		c->max_retries = (unsigned)n;
		return 0;
	}
	default:
		return -1;
	}
}

/* The environment variable name when set and not empty, else dflt. */
static const char *
env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? v : dflt;
}

static void
defaults(struct config *c)
{
	memset(c, 0, sizeof *c);
	c->sandbox = "default";
	c->snapshot = "auto";
	c->output_limit = 1u << 20;
	c->max_frame = PROTO_MAX_FRAME_DEFAULT;
	c->cell_timeout = 3600;
	c->grace = 3;
	c->memory_limit = (uint64_t)4 << 30;
	c->pids_limit = 1024;
	c->nofile_limit = 1024;
	c->fsize_limit = (uint64_t)16 << 30;
	c->tmp_size = (uint64_t)1 << 30;
	c->model = env_or("AGENTZ_MODEL", "gpt-6-astra");
	c->base_url = env_or("OPENAI_BASE_URL", "https://api.openai.com/v1");
	c->service_tier = "auto";
	c->request_timeout = 1800;
	c->max_output_tokens = 128000;
	c->max_retries = 4;
	c->outage_patience = 900;
	c->max_same_failure = 5;
	c->max_parallel_calls = MAX_PARALLEL_CALLS_DEFAULT;
	c->max_restarts = 10;
	c->journal = env_or("AGENTZ_JOURNAL", NULL);
}

int
config_parse(struct config *c, int argc, char **argv, const char *cmd)
{
	int ch;

	defaults(c);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":jvh", long_opts, NULL)) != -1) {
		if (ch == 'h') {
			usage(cmd, stdout);
			return 1;
		}
		if (ch == ':') {
			(void)fprintf(stderr, "%s: option %s needs a value "
			    "(see '%s --help')\n", cmd, argv[optind - 1], cmd);
			return -1;
		}
		if (ch == '?' && optopt != 0) {
			(void)fprintf(stderr, "%s: unknown option -%c (see "
			    "'%s --help')\n", cmd, optopt, cmd);
			return -1;
		}
		if (ch == '?') {
			(void)fprintf(stderr, "%s: unknown option %s (see "
			    "'%s --help')\n", cmd, argv[optind - 1], cmd);
			return -1;
		}
		if (one_opt(c, ch, cmd) < 0)
			return -1;
	}
	c->args = argv + optind;
	c->nargs = argc - optind;
	return 0;
}

void
config_clear(struct config *c)
{
	free(c->pass_env);
	c->pass_env = NULL;
	free(c->masks);
	c->masks = NULL;
}

/* agentz-worker next to our own executable, unless --worker says. */
char *
config_worker_path(const struct config *c)
{
	const char *given = c->worker_path;
	char self[4096], *slash, *p;
	ssize_t n;

	if (given != NULL)
		return strdup(given);
	n = readlink("/proc/self/exe", self, sizeof self - 32);
	if (n <= 0)
		return strdup("agentz-worker");
	self[n] = '\0';
	slash = strrchr(self, '/');
	p = malloc((size_t)n + 32);
	if (p != NULL)
		(void)snprintf(p, (size_t)n + 32, "%.*s/agentz-worker",
		    (int)(slash - self), self);
	return p;
}

int
config_needs_key(const char *base_url)
{
	static const char openai[] = "api.openai.com";
	const char *host = strstr(base_url, "://"), *at;
	size_t n;

	host = host != NULL ? host + 3 : base_url;
	n = strcspn(host, "/?#");
	/* user:password@host: the host comes after the last '@' */
	while ((at = memchr(host, '@', n)) != NULL) {
		n -= (size_t)(at + 1 - host);
		host = at + 1;
	}
	n = strcspn(host, ":/?#");
	if (n > 0 && host[n - 1] == '.')
		n--;
	return n == sizeof openai - 1 && strncasecmp(host, openai, n) == 0;
}

void
config_runner(struct runner_config *rc, const struct config *c,
    const char *wpath, int input_fd)
{
	memset(rc, 0, sizeof *rc);
	rc->worker.path = wpath;
	rc->worker.sandbox = c->sandbox;
	rc->worker.sandbox_debug = c->sandbox_debug;
	rc->worker.max_frame = c->max_frame;
	rc->worker.output_limit = c->output_limit;
	rc->worker.pass_env = c->pass_env;
	rc->worker.ready_timeout_ms = 30000;
	rc->worker.pidns = 1;
	rc->worker.data_limit = c->memory_limit;
	/* The cgroup ceiling sits above RLIMIT_DATA so that a big
	 * allocation is a MemoryError first and an OOM kill only for what
	 * RLIMIT_DATA does not count (shared memory, subprocesses). */
	rc->worker.limits.memory = c->memory_limit > 0 ? c->memory_limit +
	    c->memory_limit / 8 + (64u << 20) : 0;
	rc->worker.limits.pids = c->pids_limit;
	rc->worker.limits.nofile = c->nofile_limit;
	rc->worker.limits.fsize = c->fsize_limit;
	rc->cell_timeout_ms = (uint64_t)(c->cell_timeout * 1000.0);
	rc->grace_ms = (uint64_t)(c->grace * 1000.0);
	rc->snapshot = strcmp(c->snapshot, "always") == 0 ? SNAPSHOT_ALWAYS :
	    strcmp(c->snapshot, "never") == 0 ? SNAPSHOT_NEVER : SNAPSHOT_AUTO;
	rc->output_limit = c->output_limit;
	rc->max_start_failures = 5;
	rc->input_fd = input_fd;
}
