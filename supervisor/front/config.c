/*
 * config.c - option parsing (see config.h).
 */
#include "supervisor/front/config.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/size.h"
#include "supervisor/front/confighelp.h"
#include "supervisor/front/confignet.h"
#include "proto/proto.h"
#include "supervisor/text/secrets.h"


/* The values of --snapshot and --isolation, in their enums' order
 * (--isolation's first, AUTO, is its absence); --sandbox's are the
 * worker's (workers.h). */
static const char *const snapshot_names[] = { "auto", "always", "never",
	NULL };
static const char *const isolation_names[] = {
	"", "required", "best-effort", "off", NULL
};

_Static_assert(sizeof(enum sandbox_profile) == sizeof(int) &&
    sizeof(enum snapshot_policy) == sizeof(int) &&
    sizeof(enum isolation) == sizeof(int) &&
    sizeof(enum jail_network) == sizeof(int), "choices are stored as int");

/* How an option's value is read, and where it goes. */
#define SECONDS_MIN	0.001		/* a millisecond */
#define YEAR_S		31536000L

enum opt_kind {
	K_FLAG,		/* int = 1 */
	K_MORE,		/* int += 1 (-v -v) */
	K_STR,		/* const char *, as given */
	K_SECONDS,	/* double, SECONDS_MIN to max */
	K_PATIENCE,	/* double, 0 to max */
	K_UINT,		/* unsigned, min to max */
	K_LONG,		/* long, min to max */
	K_LLONG,	/* long long, min to max */
	K_SIZE,		/* size_t, at least min bytes */
	K_SIZE64,	/* uint64_t, at least min bytes (0: none, with
			 * allow0) */
	K_CHOICE,	/* an enum: the index of the value in choices */
	K_LIST,		/* const char ** (NULL-ended) and its size_t count */
	K_COST,		/* --max-cost USD */
	K_PRICE		/* --price IN,CACHED,OUT */
};

#define OFF(f)	offsetof(struct config, f)

static const struct opt {
	const char *name;
	enum opt_kind kind;
	size_t offset;
	long long min, max;
	const char *const *choices;
	int allow0;	/* K_SIZE64: 0 is accepted (none) */
	int nonempty;	/* K_LIST: an empty value is refused (a path) */
	size_t count;	/* K_LIST: the count's offset */
	int shortc;	/* its short option, 0: none */
} opts[] = {
	{ "json", K_FLAG, OFF(json), 0, 0, NULL, 0, 0, 0, 'j' },
	{ "verbose", K_MORE, OFF(verbose), 0, 0, NULL, 0, 0, 0, 'v' },
	{ "worker", K_STR, OFF(worker_path), 0, 0, NULL, 0, 0, 0, 0 },
	{ "sandbox", K_CHOICE, OFF(sandbox), 0, 0, worker_sandbox_names, 0, 0,
	    0, 0 },
	{ "sandbox-debug", K_FLAG, OFF(sandbox_debug), 0, 0, NULL, 0, 0, 0,
	    0 },
	{ "snapshot", K_CHOICE, OFF(snapshot), 0, 0, snapshot_names, 0, 0, 0,
	    0 },
	{ "output-limit", K_SIZE, OFF(output_limit), 64, 0, NULL, 0, 0, 0,
	    0 },
	{ "max-frame", K_SIZE, OFF(max_frame), 4096, 0, NULL, 0, 0, 0, 0 },
	{ "cell-timeout", K_SECONDS, OFF(cell_timeout), 0, YEAR_S, NULL, 0,
	    0, 0, 0 },
	{ "grace", K_SECONDS, OFF(grace), 0, 3600, NULL, 0, 0, 0, 0 },
	{ "memory-limit", K_SIZE64, OFF(memory_limit), 64 << 20, 0, NULL, 1,
	    0, 0, 0 },
	{ "pass-env", K_LIST, OFF(pass_env), 0, 0, NULL, 0, 0,
	    OFF(npass_env), 0 },
	/* agent runs only, from here to --max-parallel-calls: */
	{ "model", K_STR, OFF(model), 0, 0, NULL, 0, 0, 0, 0 },
	{ "base-url", K_STR, OFF(base_url), 0, 0, NULL, 0, 0, 0, 0 },
	{ "service-tier", K_STR, OFF(service_tier), 0, 0, NULL, 0, 0, 0, 0 },
	{ "request-timeout", K_SECONDS, OFF(request_timeout), 0, 86400, NULL,
	    0, 0, 0, 0 },
	{ "max-output-tokens", K_LONG, OFF(max_output_tokens), 16, 1L << 30,
	    NULL, 0, 0, 0, 0 },
	{ "max-retries", K_UINT, OFF(max_retries), 0, 100, NULL, 0, 0, 0,
	    0 },
	{ "outage-patience", K_PATIENCE, OFF(outage_patience), 0,
	    7 * 86400, NULL, 0, 0, 0, 0 },
	{ "journal", K_STR, OFF(journal), 0, 0, NULL, 0, 0, 0, 0 },
	{ "resume", K_FLAG, OFF(resume), 0, 0, NULL, 0, 0, 0, 0 },
	{ "max-restarts", K_UINT, OFF(max_restarts), 0, 1000000, NULL, 0, 0,
	    0, 0 },
	{ "max-cells", K_UINT, OFF(max_cells), 1, 1L << 30, NULL, 0, 0, 0,
	    0 },
	{ "deadline", K_SECONDS, OFF(deadline), 0, YEAR_S, NULL, 0, 0, 0,
	    0 },
	{ "max-tokens", K_LLONG, OFF(max_tokens), 1, LONG_MAX, NULL, 0, 0, 0,
	    0 },
	{ "max-cost", K_COST, OFF(max_cost), 0, 0, NULL, 0, 0, 0, 0 },
	{ "max-egress-bytes", K_SIZE64, OFF(max_egress_bytes), 1, 0, NULL, 1,
	    0, 0, 0 },
	{ "price", K_PRICE, OFF(price), 0, 0, NULL, 0, 0, 0, 0 },
	{ "max-same-failure", K_UINT, OFF(max_same_failure), 1, 1000, NULL,
	    0, 0, 0, 0 },
	{ "max-parallel-calls", K_UINT, OFF(max_parallel_calls), 1,
	    MAX_PARALLEL_CALLS_MAX, NULL, 0, 0, 0, 0 },
	{ "isolation", K_CHOICE, OFF(isolation), 0, 0, isolation_names, 0, 0,
	    0, 0 },
	{ "network", K_CHOICE, OFF(network), 0, 0, config_network_names, 0,
	    0, 0, 0 },
	{ "network-ask", K_FLAG, OFF(network_ask), 0, 0, NULL, 0, 0, 0, 0 },
	{ "approval-timeout", K_SECONDS, OFF(approval_timeout), 0, 86400,
	    NULL, 0, 0, 0, 0 },
	{ "allow-host", K_LIST, OFF(allow_hosts), 0, 0, NULL, 0, 0,
	    OFF(nallow_hosts), 0 },
	{ "deny-host", K_LIST, OFF(deny_hosts), 0, 0, NULL, 0, 0,
	    OFF(ndeny_hosts), 0 },
	{ "workspace", K_STR, OFF(workspace), 0, 0, NULL, 0, 0, 0, 0 },
	{ "tmp-size", K_SIZE64, OFF(tmp_size), 1 << 20, 0, NULL, 0, 0, 0,
	    0 },
	{ "workspace-size", K_SIZE64, OFF(workspace_size), 1 << 20, 0, NULL,
	    1, 0, 0, 0 },
	{ "mask", K_LIST, OFF(masks), 0, 0, NULL, 0, 1, OFF(nmasks), 0 },
	{ "ro-bind", K_LIST, OFF(ro_binds), 0, 0, NULL, 0, 1, OFF(nro_binds),
	    0 },
	{ "bind", K_LIST, OFF(binds), 0, 0, NULL, 0, 1, OFF(nbinds), 0 },
	{ "no-default-masks", K_FLAG, OFF(no_default_masks), 0, 0, NULL, 0,
	    0, 0, 0 },
	{ "writable-git", K_FLAG, OFF(writable_git), 0, 0, NULL, 0, 0, 0,
	    0 },
};

#define NOPTS	(sizeof opts / sizeof opts[0])
#define OPT_VAL	256	/* getopt's value of opts[i]: OPT_VAL + i */

const char *
config_sandbox_name(enum sandbox_profile p)
{
	return worker_sandbox_names[p];
}

const char *
config_isolation_name(enum isolation i)
{
	return i == ISOLATION_AUTO ? NULL : isolation_names[i];
}

static int
bad(const char *cmd, const char *opt, const char *val, const char *why)
{
	(void)fprintf(stderr, "%s: invalid %s '%s': %s\n", cmd, opt, val,
	    why);
	return -1;
}

/* Seconds from min (a millisecond: less would round to 0, which means
 * none; or 0 where that means none) to max (more would overflow the
 * milliseconds, or mean "never" without saying so). */
static int
seconds(const char *cmd, const char *opt, const char *val, double min,
    double max, double *out)
{
	char *end, range[80];
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno != 0 || end == val || *end != '\0' || !isfinite(v) ||
	    v < min || v > max) {
		(void)snprintf(range, sizeof range, "expected seconds from %g "
		    "to %.0f", min, max);
		return bad(cmd, opt, val, range);
	}
	*out = v;
	return 0;
}

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

/* --max-cost USD (an optional leading '$'). */
static int
cost(const char *cmd, const char *val, double *out)
{
	const char *s = val[0] == '$' ? val + 1 : val;
	char *end;

	if (!isdigit((unsigned char)*s) && *s != '.')
		return bad(cmd, "--max-cost", val, "expected US dollars > 0, "
		    "e.g. 2.50");
	errno = 0;
	*out = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(*out) ||
	    *out <= 0 || *out > 1e9)
		return bad(cmd, "--max-cost", val, "expected US dollars > 0, "
		    "e.g. 2.50");
	return 0;
}

int
config_list_add(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 2) * sizeof *nv);

	if (nv == NULL)
		return -1;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

static int
set_size(const char *cmd, const char *opt, const char *val, uint64_t min,
    int allow0, uint64_t *out)
{
	char least[96], n[32];

	if (size_parse(val, out) < 0)
		return bad(cmd, opt, val, "expected a size like 512K, 64M, 4G");
	if (*out < min && !(allow0 && *out == 0)) {
		size_format(min, n, sizeof n);
		(void)snprintf(least, sizeof least, "too small: at least %s%s",
		    n, allow0 ? " (or 0: none)" : "");
		return bad(cmd, opt, val, least);
	}
	return 0;
}

/* The index of val in o's choices (refused: said, with them all). */
static int
choice(const char *cmd, const char *flag, const struct opt *o,
    const char *val)
{
	const char *const *c = o->choices;
	char expect[128];
	size_t n = 0, i, first = c[0][0] == '\0';	/* "": not a value */

	while (c[n] != NULL)
		n++;
	for (i = first; i < n; i++)
		if (strcmp(val, c[i]) == 0)
			return (int)i;
	(void)snprintf(expect, sizeof expect, "expected %s", c[first]);
	for (i = first + 1; i < n; i++)
		(void)snprintf(expect + strlen(expect), sizeof expect -
		    strlen(expect), "%s%s", i + 1 < n ? ", " : " or ", c[i]);
	(void)bad(cmd, flag, val, expect);
	return -1;
}

/* Numbers: whole ones in o's range, seconds, sizes. */
static int
number(struct config *c, const struct opt *o, const char *flag,
    const char *val, const char *cmd)
{
	char *at = (char *)c + o->offset;
	uint64_t v;
	long n;

	switch (o->kind) {
	case K_SECONDS:
	case K_PATIENCE:
		return seconds(cmd, flag, val, o->kind == K_SECONDS ?
		    SECONDS_MIN : 0, (double)o->max, (double *)(void *)at);
	case K_SIZE:
	case K_SIZE64:
		if (set_size(cmd, flag, val, (uint64_t)o->min, o->allow0,
		    &v) < 0)
			return -1;
		if (o->kind == K_SIZE)
			*(size_t *)(void *)at = (size_t)v;
		else
			*(uint64_t *)(void *)at = v;
		return 0;
	case K_FLAG: case K_MORE: case K_STR: case K_UINT: case K_LONG:
	case K_LLONG: case K_CHOICE: case K_LIST: case K_COST: case K_PRICE:
		break;
	}
	if (count(cmd, flag, val, (long)o->min, (long)o->max, &n) < 0)
		return -1;
	if (o->kind == K_UINT)
		*(unsigned *)(void *)at = (unsigned)n;
	else if (o->kind == K_LONG)
		*(long *)(void *)at = n;
	else
		*(long long *)(void *)at = n;
	return 0;
}

/* Option o with its value val (NULL: none) into c. */
static int
one_opt(struct config *c, const struct opt *o, const char *val,
    const char *cmd)
{
	char *at = (char *)c + o->offset, flag[40];
	int i;

	(void)snprintf(flag, sizeof flag, "--%s", o->name);
	switch (o->kind) {
	case K_FLAG: *(int *)(void *)at = 1; return 0;
	case K_MORE: (*(int *)(void *)at)++; return 0;
	case K_STR: *(const char **)(void *)at = val; return 0;
	case K_CHOICE:
		if ((i = choice(cmd, flag, o, val)) < 0)
			return -1;
		*(int *)(void *)at = i;
		return 0;
	case K_LIST:
		if (o->nonempty && val[0] == '\0')
			return bad(cmd, flag, val, "expected a path");
		return config_list_add((const char ***)(void *)at,
		    (size_t *)(void *)((char *)c + o->count), val);
	case K_COST:
		return cost(cmd, val, (double *)(void *)at);
	case K_PRICE:
		if (price_parse(val, &c->price) < 0)
			return bad(cmd, "--price", val, "expected IN,CACHED,OUT: "
			    "three numbers >= 0, USD per 1M tokens, e.g. "
			    "1.25,0.125,10");
		c->has_price = 1;
		return 0;
	case K_SECONDS: case K_PATIENCE: case K_UINT: case K_LONG:
	case K_LLONG: case K_SIZE: case K_SIZE64:
		break;
	}
	return number(c, o, flag, val, cmd);
}

/* getopt's table of opts (and --help), built once. */
static const struct option *
long_opts(void)
{
	static struct option lo[NOPTS + 2];
	size_t i;

	if (lo[0].name != NULL)
		return lo;
	for (i = 0; i < NOPTS; i++) {
		lo[i].name = opts[i].name;
		lo[i].has_arg = opts[i].kind == K_FLAG ||
		    opts[i].kind == K_MORE ? no_argument : required_argument;
		lo[i].val = opts[i].shortc != 0 ? opts[i].shortc :
		    OPT_VAL + (int)i;
	}
	lo[NOPTS].name = "help";
	lo[NOPTS].val = 'h';
	return lo;
}

/* The option getopt returned as ch. */
static const struct opt *
opt_of(int ch)
{
	size_t i;

	if (ch >= OPT_VAL && (size_t)(ch - OPT_VAL) < NOPTS)
		return &opts[ch - OPT_VAL];
	for (i = 0; i < NOPTS; i++)
		if (opts[i].shortc == ch)
			return &opts[i];
	return NULL;
}

/* Whether o is for agent runs only (exec refuses it: it would do
 * nothing there). */
static int
agent_only(const struct opt *o)
{
	const struct opt *first = NULL, *last = NULL;
	size_t i;

	for (i = 0; i < NOPTS; i++)
		if (strcmp(opts[i].name, "model") == 0)
			first = &opts[i];
		else if (strcmp(opts[i].name, "max-parallel-calls") == 0)
			last = &opts[i];
	return first != NULL && last != NULL && o >= first && o <= last;
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
	c->sandbox = SANDBOX_DEFAULT;
	c->snapshot = SNAPSHOT_AUTO;
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
	c->network = NETWORK_UNSET;
	c->approval_timeout = 300;
}

int
config_parse(struct config *c, int argc, char **argv, const char *cmd)
{
	int ch;

	defaults(c);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":jvh", long_opts(), NULL)) != -1) {
		if (ch == 'h') {
			config_usage(cmd, stdout);
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
		if (opt_of(ch) != NULL && config_is_exec(cmd) &&
		    agent_only(opt_of(ch))) {
			(void)fprintf(stderr, "%s: --%s is for agent runs (agentz "
			    "\"TASK\"); exec runs no model\n", cmd,
			    opt_of(ch)->name);
			return -1;
		}
		if (opt_of(ch) == NULL ||
		    one_opt(c, opt_of(ch), optarg, cmd) < 0)
			return -1;
	}
	c->args = argv + optind;
	c->nargs = argc - optind;
	return config_network_check(c, cmd);
}

void
config_clear(struct config *c)
{
	free(c->pass_env);
	c->pass_env = NULL;
	free(c->masks);
	c->masks = NULL;
	free(c->ro_binds);
	c->ro_binds = NULL;
	free(c->binds);
	c->binds = NULL;
	free(c->allow_hosts);
	c->allow_hosts = NULL;
	free(c->deny_hosts);
	c->deny_hosts = NULL;
	config_network_clear(c);
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

/* --pass-env NAME naming a secret: said once per name, never passed
 * (secrets.h: a secret's value never reaches the worker). */
static void
warn_secret_pass_env(const struct config *c, const char *cmd)
{
	size_t i, j;

	for (i = 0; i < c->npass_env; i++) {
		const char *n = c->pass_env[i];

		for (j = 0; j < i && strcmp(c->pass_env[j], n) != 0; j++)
			;
		if (j == i && secrets_is_secret_name(n, strlen(n)))
			(void)fprintf(stderr, "%s: warning: --pass-env %s names a "
			    "secret (OPENAI_API_KEY, *_API_KEY, *_TOKEN, "
			    "*_SECRET, *_PASSWORD or AGENTZ_SECRETS): it is not "
			    "passed, the cell cannot read it\n", cmd, n);
	}
}

int
config_check(const struct config *c, const char *cmd, const char *wpath)
{
	const char *why = NULL;
	struct stat st;

	warn_secret_pass_env(c, cmd);
	if (stat(wpath, &st) < 0)
		why = errno == ENOENT ? "no such file" : strerror(errno);
	else if (S_ISDIR(st.st_mode))
		why = "a directory, not the agentz-worker executable";
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (access(wpath, X_OK) < 0)
		why = "not executable";
	if (why == NULL)
		return 0;
	if (c->worker_path != NULL)
		(void)fprintf(stderr, "%s: invalid --worker '%s': %s\n", cmd,
		    wpath, why);
	else
		(void)fprintf(stderr, "%s: the worker %s: %s (install "
		    "agentz-worker next to agentz, or give --worker PATH)\n",
		    cmd, wpath, why);
	return -1;
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
	/* no one file larger than the workspace may hold */
	if (c->workspace_size > 0 && c->workspace_size < c->fsize_limit)
		rc->worker.limits.fsize = c->workspace_size;
	rc->workspace_size = c->workspace_size;
	rc->cell_timeout_ms = (uint64_t)(c->cell_timeout * 1000.0);
	rc->grace_ms = (uint64_t)(c->grace * 1000.0);
	rc->snapshot = c->snapshot;
	rc->output_limit = c->output_limit;
	rc->max_start_failures = 5;
	rc->input_fd = input_fd;
	rc->allow_hosts = c->allow_hosts;
	rc->deny_hosts = c->deny_hosts;
	rc->network_ask = c->network_ask;
	rc->max_egress_bytes = c->max_egress_bytes;
	rc->approval_ms = (uint64_t)(c->approval_timeout * 1000.0);
}

void
config_view(struct view_options *vo, const struct config *c)
{
	memset(vo, 0, sizeof *vo);
	vo->workspace = c->workspace;
	vo->masks = c->masks;
	vo->nmasks = c->nmasks;
	vo->ro_binds = c->ro_binds;
	vo->nro_binds = c->nro_binds;
	vo->binds = c->binds;
	vo->nbinds = c->nbinds;
	vo->no_default_masks = c->no_default_masks;
	vo->writable_git = c->writable_git;
	vo->journal = c->journal;
	vo->isolation = c->isolation;
	vo->network = c->network;
	vo->tmp_size = c->tmp_size;
}
