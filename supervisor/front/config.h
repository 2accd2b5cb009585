/*
 * config.h - operator settings: defaults, then the environment, then the
 * command line. Cell code can change none of them.
 */
#ifndef AGENTZ_CONFIG_H
#define AGENTZ_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/exitcodes.h"
#include "supervisor/agent/agent.h"
#include "supervisor/agent/price.h"
#include "supervisor/run/runner.h"
#include "supervisor/world/view.h"


/* --network not given (config_parse then picks the default). */
#define NETWORK_UNSET ((enum jail_network)-1)

struct config {
	int json;
	int verbose;
	const char *worker_path;	/* default: next to our executable */
	enum sandbox_profile sandbox;	/* --sandbox (run/workers.h) */
	int sandbox_debug;
	enum snapshot_policy snapshot;
	size_t output_limit;
	size_t max_frame;
	double cell_timeout;		/* seconds */
	double grace;			/* seconds */
	uint64_t memory_limit;		/* bytes, 0 = none */
	unsigned pids_limit;		/* tasks in the worker's tree */
	unsigned nofile_limit;		/* open files per process */
	uint64_t fsize_limit;		/* largest file a cell may write */
	const char **pass_env;		/* NULL-terminated */
	/* the worker's world (sandbox/jail.h) */
	enum isolation isolation;	/* AUTO: required as root or under
					 * systemd */
	enum jail_network network;	/* --network: none (its own), host,
					 * proxy (the default of agent runs) */
	const char **allow_hosts;	/* --allow-host, NULL-terminated */
	size_t nallow_hosts;
	const char **deny_hosts;	/* --deny-host, NULL-terminated */
	size_t ndeny_hosts;
	int network_ask;		/* --network-ask */
	uint64_t max_egress_bytes;	/* --max-egress-bytes, 0 none */
	char **host_files;		/* the @FILE lists' texts, which the
					 * entries point into */
	size_t nhost_files;
	double approval_timeout;	/* --approval-timeout, seconds */
	const char *workspace;		/* NULL = the working directory */
	uint64_t tmp_size;		/* private /tmp and /dev/shm, each */
	uint64_t workspace_size;	/* what it may hold, 0: no bound */
	const char **masks;		/* --mask, NULL-terminated */
	size_t nmasks;
	const char **ro_binds;		/* --ro-bind SRC[:DST], NULL-terminated */
	size_t nro_binds;
	const char **binds;		/* --bind SRC[:DST], NULL-terminated */
	size_t nbinds;
	int no_default_masks;
	int writable_git;		/* cells may write .git (and make one) */
	/* the model (agent runs) */
	const char *model;		/* --model, AGENTZ_MODEL */
	const char *base_url;		/* --base-url, OPENAI_BASE_URL */
	const char *service_tier;	/* --service-tier, "" = not sent */
	double request_timeout;		/* seconds per model request */
	long max_output_tokens;
	unsigned max_retries;
	double outage_patience;		/* seconds an outage is waited out,
					 * 0 = not at all (--outage-patience) */
	/* hard stops outside the model (0 = none) */
	unsigned max_cells;
	double deadline;		/* seconds of run wall clock */
	long long max_tokens;
	double max_cost;		/* USD, --max-cost; 0 = none */
	struct price price;		/* --price for the run's model */
	int has_price;			/* --price was given */
	unsigned max_same_failure;	/* identical failure signatures */
	/* model calls in flight per cell; more wait in order (FIFO) */
	unsigned max_parallel_calls;
	const char *journal;		/* --journal, AGENTZ_JOURNAL */
	int resume;			/* --resume: continue that journal */
	unsigned max_restarts;		/* resumes of one run, 0 = unlimited */
	size_t npass_env;
	/* operands after the options */
	char **args;
	int nargs;
};

/*
 * Parses argv (after the subcommand) into c. Returns 0, 1 when --help was
 * printed, or -1 after printing a usage error naming the bad option and
 * value. cmd is the command as the user typed it, for messages: "agentz"
 * or "agentz exec".
 */
int config_parse(struct config *c, int argc, char **argv, const char *cmd);
void config_clear(struct config *c);
/* agentz-worker next to our own executable, unless --worker says. */
char *config_worker_path(const struct config *c);
/*
 * The set-up checks made before anything starts (cmd as for
 * config_parse): the worker wpath must be an executable file (else one
 * line naming it and why: -1, a usage error), and each --pass-env name
 * that is a secret's is said once on stderr: it is not passed (0).
 */
int config_check(const struct config *c, const char *cmd, const char *wpath);
/*
 * 1 when a run against base_url needs an API key: its host is OpenAI's
 * (api.openai.com, any case, with or without a port or trailing dot).
 * Other servers (a local model, a proxy) may need none: 0.
 */
int config_needs_key(const char *base_url);

/* The names of --sandbox and --isolation values, as given (NULL:
 * --isolation not given). */
const char *config_sandbox_name(enum sandbox_profile p);
const char *config_isolation_name(enum isolation i);
/* The worker's view that follows from the options (see view.h). */
void config_view(struct view_options *vo, const struct config *c);
/* The runner settings that follow from the operator's configuration c
 * (wpath: the worker executable; input_fd for input(), -1 none). */
void config_runner(struct runner_config *rc, const struct config *c,
    const char *wpath, int input_fd);

#endif
