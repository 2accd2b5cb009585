/*
 * config.c - option parsing (see config.h).
 */
#include "supervisor/config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/proto.h"

enum {
	OPT_WORKER = 256, OPT_SANDBOX, OPT_SANDBOX_DEBUG, OPT_OUTPUT_LIMIT,
	OPT_MAX_FRAME, OPT_CELL_TIMEOUT, OPT_GRACE, OPT_MEMORY_LIMIT,
	OPT_PASS_ENV
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, 'j'},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"worker", required_argument, NULL, OPT_WORKER},
	{"sandbox", required_argument, NULL, OPT_SANDBOX},
	{"sandbox-debug", no_argument, NULL, OPT_SANDBOX_DEBUG},
	{"output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT},
	{"max-frame", required_argument, NULL, OPT_MAX_FRAME},
	{"cell-timeout", required_argument, NULL, OPT_CELL_TIMEOUT},
	{"grace", required_argument, NULL, OPT_GRACE},
	{"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
	{"pass-env", required_argument, NULL, OPT_PASS_ENV},
	{NULL, 0, NULL, 0}
};

static void
usage(const char *cmd, FILE *f)
{
	(void)fprintf(f,
	    "usage: agentz %s [options] FILE... (- reads cells from stdin, "
	    "separated by '# %%%%' lines)\n"
	    "  --json               one JSON record per cell on stdout\n"
	    "  -v, --verbose        more diagnostics\n"
	    "  --output-limit SIZE  output kept per cell, head+tail "
	    "(default 1M)\n"
	    "  --cell-timeout SECS  wall-clock limit per cell (default 3600)\n"
	    "  --grace SECS         after the interrupt, before the kill "
	    "(default 3)\n"
	    "  --memory-limit SIZE  worker memory ceiling (default 4G, 0 = "
	    "none)\n"
	    "  --sandbox PROFILE    seccomp profile: off, default, strict\n"
	    "  --sandbox-debug      name a blocked syscall instead of "
	    "failing it\n"
	    "  --pass-env NAME      pass one more variable to the worker\n"
	    "  --worker PATH        the agentz-worker executable\n"
	    "  --max-frame SIZE     control channel frame limit (default 64M)\n",
	    cmd);
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

static int
bad(const char *cmd, const char *opt, const char *val, const char *why)
{
	(void)fprintf(stderr, "agentz %s: invalid %s '%s': %s\n", cmd, opt,
	    val, why);
	return -1;
}

static int
add_pass_env(struct config *c, const char *name)
{
	const char **v = realloc(c->pass_env, (c->npass_env + 2) * sizeof *v);

	if (v == NULL)
		return -1;
	v[c->npass_env++] = name;
	v[c->npass_env] = NULL;
	c->pass_env = v;
	return 0;
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
		return add_pass_env(c, optarg);
	default:
		return -1;
	}
}

static void
defaults(struct config *c)
{
	memset(c, 0, sizeof *c);
	c->sandbox = "default";
	c->output_limit = 1u << 20;
	c->max_frame = PROTO_MAX_FRAME_DEFAULT;
	c->cell_timeout = 3600;
	c->grace = 3;
	c->memory_limit = (uint64_t)4 << 30;
	c->pids_limit = 1024;
	c->nofile_limit = 1024;
	c->fsize_limit = (uint64_t)16 << 30;
}

int
config_parse(struct config *c, int argc, char **argv, const char *cmd)
{
	int ch;

	defaults(c);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "jvh", long_opts, NULL)) != -1) {
		if (ch == 'h') {
			usage(cmd, stdout);
			return 1;
		}
		if (ch == '?' || ch == ':') {
			(void)fprintf(stderr, "agentz %s: unknown option or "
			    "missing value: %s\n", cmd, argv[optind - 1]);
			usage(cmd, stderr);
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
}
