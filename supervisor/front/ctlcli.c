/*
 * ctlcli.c - `agentz ctl` and `agentz runs` (see ctlcli.h): short-lived
 * blocking clients of the runs' control sockets, found and named by
 * ctlfind.c.
 *
 * agentz ctl exits 0 when the run answered ok, 1 when it answered with
 * an error, 2 for a usage error (an unknown command is one, decided here
 * before any run is asked) or no run to talk to (a path that is not a
 * socket, a name no run or more than one run has).
 *
 * The replies are read with text/jsonf.h; the one place that writes a
 * reply back, agentz runs --json, adds "socket" and "handle" to the
 * reply's text.
 */
#include "supervisor/front/ctlcli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/front/config.h"
#include "supervisor/front/ctlfind.h"
#include "supervisor/text/jsonf.h"

#define CTL_TIMEOUT_S 10
#define RUNS_TIMEOUT_S 2

static const char ctl_usage[] =
    "usage: agentz ctl RUN_OR_SOCKET COMMAND [ARGS]\n"
    "  RUN is a run's handle (agentz runs lists them: its name, or\n"
    "  NAME-PID when runs share a name), or the path of its control\n"
    "  socket. COMMAND is one of:\n"
    "    status        the run as it stands (one JSON object)\n"
    "    note TEXT     a note for the model's next request\n"
    "    stop          end the run after the running cell (exit 6)\n"
    "    stop --now    interrupt the running cell, then end the run\n"
    "    pause         start no new cell until resume\n"
    "    resume        go on after a pause\n"
    "    kill-cell     the running cell gets the timeout treatment now\n"
    "    budgets [OPTIONS]  the budgets re-read from these options\n"
    "                  (--max-cells, --deadline, --max-tokens, --max-cost,\n"
    "                  --max-same-failure; one not given: its default)\n"
    "    allow HOST    --network proxy: cells may reach HOST from now on\n"
    "                  (an --allow-host entry: name, *.suffix, address,\n"
    "                  CIDR, each with :PORT or not)\n"
    "    deny HOST     the same for --deny-host (wins over allow)\n"
    "    network       the network, its policy and live connections\n"
    "    approve [--always] ID  --network-ask: let held connection ID\n"
    "                  through (--always: its host:port from now on)\n"
    "    reject ID     refuse held connection ID\n"
    "  prints the run's reply (a JSON line); exit 0 ok, 1 the run said no,\n"
    "  2 usage or no run to talk to\n";

static const char runs_usage[] =
    "usage: agentz runs [--json] [DIR|SOCKET...]\n"
    "  lists the agent runs on this host from their control sockets\n"
    "  ($RUNTIME_DIRECTORY, /run/agentz, $XDG_RUNTIME_DIR/agentz, or the\n"
    "  folders and sockets given): each run's handle (what agentz ctl\n"
    "  takes), state, cell, age, tokens, pid, working folder, the task's\n"
    "  first words, last cell; --json prints one JSON object a line (the\n"
    "  run's status, \"socket\" and \"handle\"; a socket nobody answers\n"
    "  is \"state\": \"stale\")\n";

/* --- agentz ctl --------------------------------------------------------------------- */

/* 0 when path is a socket, else -1, said. */
static int
check_socket(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		(void)fprintf(stderr, "agentz ctl: %s: %s: not a run's control "
		    "socket (agentz runs lists the runs)\n", path,
		    strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		(void)fprintf(stderr, "agentz ctl: %s is not a run's control "
		    "socket (%s; agentz runs lists the runs)\n", path,
		    S_ISDIR(st.st_mode) ? "a folder" : S_ISREG(st.st_mode) ?
		    "a file" : "not a socket");
		return -1;
	}
	return 0;
}

/* Whether run names r: by its name (by_pid 0) or as NAME-PID (1). */
static int
names(const struct ctl_found *r, const char *run, int by_pid)
{
	char h[320];

	if (r->status == NULL || r->name == NULL)
		return 0;
	if (!by_pid)
		return strcmp(r->name, run) == 0;
	(void)snprintf(h, sizeof h, "%s-%lld", r->name, r->pid);
	return r->pid > 0 && strcmp(h, run) == 0;
}

/* How many live runs run names (the last one in *at). */
static size_t
count_named(const struct ctl_founds *fs, const char *run, int by_pid,
    size_t *at)
{
	size_t i, k = 0;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i].searched && names(&fs->v[i], run, by_pid)) {
			*at = i;
			k++;
		}
	return k;
}

static void
say_ambiguous(const struct ctl_founds *fs, const char *run, int by_pid,
    size_t k)
{
	const struct ctl_found *r;
	size_t i;

	(void)fprintf(stderr, "agentz ctl: '%s' names %zu runs; give the "
	    "handle of one:\n", run, k);
	for (i = 0; i < fs->n; i++) {
		r = &fs->v[i];
		if (!r->searched || !names(r, run, by_pid))
			continue;
		(void)fprintf(stderr, "  %-24s pid %-8lld %s  \"%s\"\n",
		    r->handle != NULL ? r->handle : r->path, r->pid,
		    r->cwd != NULL ? r->cwd : "?", r->task != NULL ? r->task :
		    "");
	}
}

/* A socket nobody answers whose file name is run: its path (asked again,
 * it says why not), else NULL. */
static char *
silent_named(const struct ctl_founds *fs, const char *run)
{
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i].status == NULL && strcmp(fs->v[i].stem, run) == 0)
			return strdup(fs->v[i].path);
	return NULL;
}

/*
 * The socket of the one live run that run names (its name, else
 * NAME-PID) in the folders searched, else a silent socket of that file
 * name; NULL when none or several (said).
 */
static char *
find_named(const char *run)
{
	struct ctl_founds fs = { NULL, 0, 0 };
	char *path = NULL;
	size_t k, at = 0;
	int by_pid = 0;

	ctl_found_search(&fs, 0, ctl_found_family, run);
	ctl_found_ask(&fs, RUNS_TIMEOUT_S);
	ctl_found_handles(&fs);
	if ((k = count_named(&fs, run, 0, &at)) == 0)
		k = count_named(&fs, run, by_pid = 1, &at);
	if (k == 1)
		path = strdup(fs.v[at].path);
	else if (k > 1)
		say_ambiguous(&fs, run, by_pid, k);
	else if ((path = silent_named(&fs, run)) == NULL)
		(void)fprintf(stderr, "agentz ctl: no run named '%s' (agentz "
		    "runs lists them; or give the socket's path)\n", run);
	ctl_found_free(&fs);
	return path;
}

/* RUN's socket: a path as given, else the run named so. NULL: said. */
static char *
find_run(const char *run)
{
	if (strchr(run, '/') == NULL)
		return find_named(run);
	return check_socket(run) == 0 ? strdup(run) : NULL;
}

/* The request: the words after RUN joined by spaces, on one line. */
static char *
request_line(int argc, char **argv)
{
	struct buf b;
	char *s;
	int i;

	buf_init(&b);
	for (i = 0; i < argc; i++)
		if ((i > 0 && buf_append(&b, " ", 1) < 0) ||
		    buf_append_str(&b, argv[i]) < 0) {
			buf_clear(&b);
			return NULL;
		}
	s = buf_detach(&b, NULL);
	for (i = 0; s != NULL && s[i] != '\0'; i++)
		if (s[i] == '\n' || s[i] == '\r')
			s[i] = ' ';
	return s;
}

/* 0 when the reply says "ok": true, 1 otherwise. */
static int
reply_status(const char *reply)
{
	/* a struct member: cppcheck, not seeing jf_parse write a plain int,
	 * would take it for the 0 it starts as */
	struct { int ok; } r = { 0 };
	struct jf_in in[] = {
		{ .key = "ok", .kind = JF_KBOOL, .dst = &r.ok },
		{ .key = NULL }
	};

	if (jf_parse(reply, strlen(reply), in) < 0 || in[0].found != 1)
		return EXIT_FAILED;
	return r.ok ? EXIT_OK : EXIT_FAILED;
}

/* The request line, checked as the run would: NULL when it is not one
 * (said). */
static char *
checked_request(int argc, char **argv)
{
	struct ctl_req q;
	char *line = request_line(argc, argv), err[256];

	if (line == NULL || strlen(line) >= CTL_LINE_MAX) {
		(void)fprintf(stderr, "agentz ctl: the request is over %d "
		    "bytes\n", CTL_LINE_MAX - 1);
	} else if (ctl_parse(line, strlen(line), &q, err, sizeof err) < 0) {
		(void)fprintf(stderr, "agentz ctl: %s\n", err);
	} else {
		return line;
	}
	free(line);
	return NULL;
}

int
ctlcli_ctl_main(int argc, char **argv)
{
	char *path, *line, *reply;
	int rc;

	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		(void)fputs(ctl_usage, stdout);
		return EXIT_OK;
	}
	if (argc < 3) {
		(void)fputs(ctl_usage, stderr);
		return EXIT_USAGE;
	}
	if ((line = checked_request(argc - 2, argv + 2)) == NULL)
		return EXIT_USAGE;
	if ((path = find_run(argv[1])) == NULL) {
		free(line);
		return EXIT_USAGE;
	}
	reply = ctl_ask(path, line, CTL_TIMEOUT_S);
	if (reply == NULL) {
		(void)fprintf(stderr, "agentz ctl: %s: %s%s\n", path,
		    strerror(errno), errno == ECONNREFUSED ? " (a stale "
		    "socket: its run is gone)" : "");
		rc = EXIT_USAGE;
	} else {
		(void)printf("%s\n", reply);
		rc = reply_status(reply);
	}
	free(reply);
	free(line);
	free(path);
	return rc;
}

/* --- agentz runs -------------------------------------------------------------------- */

static int
cmp_found(const void *a, const void *b)
{
	return strcmp(((const struct ctl_found *)a)->path,
	    ((const struct ctl_found *)b)->path);
}

/*
 * A JSON object's text (a reply jf_parse took) with "socket" and "handle"
 * added last,
 * by hand: jsonf reads chosen fields into C and writes objects from
 * fields, but cannot take an object whole and add one to it (the status
 * has more fields than a row shows, and may grow). A run writes its
 * replies compact, as jansson (under jf_dumps) does, so the text is what
 * re-encoding the parsed object gave before: {...} becomes
 * {...,"socket":"PATH","handle":"H"}. NULL when out of memory.
 */
static char *
with_socket(const char *reply, const struct ctl_found *r)
{
	struct jf f[] = { JF_S("socket", r->path), JF_S("handle", r->handle),
	    JF_END };
	char *sock = jf_dumps(f, NULL), *s = NULL;	/* {"socket":...} */
	size_t n = strlen(reply);
	int empty;

	while (n > 0 && strchr(" \t\r\n", reply[n - 1]) != NULL)
		n--;
	if (sock != NULL && n > 0 && reply[n - 1] == '}') {
		n--;	/* the closing brace; what is before it: "{" for {} */
		empty = strspn(reply, " \t\r\n{") >= n;
		if (asprintf(&s, "%.*s%s%s", (int)n, reply, empty ? "" : ",",
		    sock + 1) < 0)
			s = NULL;
	}
	free(sock);
	return s;
}

/* The run's status with "socket" and "handle" (JSON text), or a
 * stand-in saying why none came. */
static char *
status_of(const struct ctl_found *r)
{
	int e = r->err;

	if (r->status != NULL)
		return with_socket(r->status, r);
	return jf_dumps((struct jf[]){ JF_S("name", r->stem),
	    JF_S("socket", r->path), JF_S("handle", r->handle),
	    JF_S("state", e == ECONNREFUSED || e == ENOENT ? "stale" :
	    e == EACCES ? "denied" : "no-answer"), JF_S("error", strerror(e)),
	    JF_END }, NULL);
}

static void
human_age(double s, char *buf, size_t n)
{
	if (s < 0)
		(void)snprintf(buf, n, "-");
	else if (s < 120)
		(void)snprintf(buf, n, "%.0fs", s);
	else if (s < 7200)
		(void)snprintf(buf, n, "%.0fm", s / 60);
	else
		(void)snprintf(buf, n, "%.1fh", s / 3600);
}

/* What a row shows of a status (or a stand-in); a field absent, null or
 * of another type stays as set here (a number 0, a string NULL). */
struct row {
	char *state, *last, *error;
	long long cell_n;
	double age_s, tokens_used;
};


/* s with control characters shown as '?' (a task or folder may hold
 * them), cut to at most n - 1 bytes. */
static void
printable(const char *s, char *buf, size_t n)
{
	size_t i;

	(void)snprintf(buf, n, "%s", s != NULL ? s : "-");
	for (i = 0; buf[i] != '\0'; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
}

#define ROW_FMT "%-24s %-13s %-5s %-6s %-10s %-8s %-32s %-36s %s\n"
#define ROW_TASK 30	/* bytes of the task's first words in a row */

/* The task's first words quoted, cut after a word to ROW_TASK bytes
 * ("..." added then); "-" when none. */
static void
row_task(const char *task, char *buf, size_t n)
{
	char words[ROW_TASK + 1];
	size_t k;

	if (task == NULL) {
		(void)snprintf(buf, n, "-");
		return;
	}
	printable(task, words, sizeof words);
	k = strlen(words);
	if (strlen(task) > k) {		/* cut: after its last whole word */
		if (task[k] != ' ' && strrchr(words, ' ') != NULL)
			k = (size_t)(strrchr(words, ' ') - words);
		while (k > 0 && words[k - 1] == ' ')
			k--;
		if (k >= 3 && strcmp(words + k - 3, "...") == 0)
			k -= 3;
		words[k] = '\0';
	}
	(void)snprintf(buf, n, "\"%s%s\"", words, strlen(task) > k ? "..." :
	    "");
}

/* One row of agentz runs: the run found, its status (or a stand-in). */
static void
print_line(const struct ctl_found *r, const char *status)
{
	struct row w = { .cell_n = 0 };
	struct jf_in cell[] = {
		{ .key = "n", .kind = JF_KINT, .dst = &w.cell_n },
		{ .key = NULL }
	}, tok[] = {
		{ .key = "used", .kind = JF_KREAL, .dst = &w.tokens_used },
		{ .key = NULL }
	}, in[] = {
		{ .key = "state", .kind = JF_KSTR, .dst = &w.state },
		{ .key = "cell", .kind = JF_KOBJ, .sub = cell },
		{ .key = "age_s", .kind = JF_KREAL, .dst = &w.age_s },
		{ .key = "tokens", .kind = JF_KOBJ, .sub = tok },
		{ .key = "last", .kind = JF_KSTR, .dst = &w.last },
		{ .key = "error", .kind = JF_KSTR, .dst = &w.error },
		{ .key = NULL }
	};
	char c[16] = "-", age[16], tokens[48] = "-", pid[24] = "-";
	char cwd[1024], task[ROW_TASK + 8];

	if (jf_parse(status, strlen(status), in) < 0)
		return;
	if (in[1].found == 1)
		(void)snprintf(c, sizeof c, "%lld", w.cell_n);
	human_age(in[2].found == 1 ? w.age_s : -1, age, sizeof age);
	if (in[3].found == 1)
		(void)snprintf(tokens, sizeof tokens, "%.0f", w.tokens_used);
	if (r->pid > 0)
		(void)snprintf(pid, sizeof pid, "%lld", r->pid);
	printable(r->cwd, cwd, sizeof cwd);
	row_task(r->task, task, sizeof task);
	(void)printf(ROW_FMT, r->handle != NULL ? r->handle : r->path,
	    w.state, c, age, tokens, pid, cwd, task, w.last != NULL ?
	    w.last : w.error != NULL ? w.error : "-");
	jf_in_free(in);
}

static void
list(struct ctl_founds *fs, int as_json)
{
	size_t i, shown = 0;
	char *s;

	if (fs->n > 0)	/* qsort of NULL: undefined, even for none */
		qsort(fs->v, fs->n, sizeof fs->v[0], cmp_found);
	for (i = 0; i < fs->n; i++) {
		if (!fs->v[i].shown || (s = status_of(&fs->v[i])) == NULL)
			continue;
		if (!as_json && shown++ == 0)
			(void)printf(ROW_FMT, "NAME", "STATE", "CELL", "AGE",
			    "TOKENS", "PID", "FOLDER", "TASK", "LAST");
		if (as_json)
			(void)printf("%s\n", s);
		else
			print_line(&fs->v[i], s);
		free(s);
	}
	if (shown == 0 && !as_json)
		(void)fprintf(stderr, "agentz runs: no runs found\n");
}

/* Whether stem.sock may be a run of a name a run given has. */
static int
same_name(const char *stem, const void *arg)
{
	const struct ctl_founds *fs = arg;
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i].shown && ctl_found_family(stem, fs->v[i].name))
			return 1;
	return 0;
}

/* A folder or socket given: its sockets, or -1 (said). */
static int
scan_given(struct ctl_founds *fs, const char *where)
{
	if (ctl_found_scan(fs, where, 0, 1, NULL, NULL) == 0)
		return 0;
	if (errno == ENOTDIR)
		(void)fprintf(stderr, "agentz runs: %s is neither a folder nor "
		    "a socket (give folders of control sockets, or "
		    "sockets)\n", where);
	else
		(void)fprintf(stderr, "agentz runs: %s: %s (give folders of "
		    "control sockets, or sockets)\n", where, strerror(errno));
	return -1;
}

int
ctlcli_runs_main(int argc, char **argv)
{
	struct ctl_founds fs = { NULL, 0, 0 };
	int as_json = 0, i, given = 0, rc = -1;

	for (i = 1; i < argc && rc < 0; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			as_json = 1;
		} else if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			(void)fputs(runs_usage, stdout);
			rc = EXIT_OK;
		} else if (argv[i][0] == '-') {
			(void)fprintf(stderr, "agentz runs: unknown option '%s'\n"
			    "%s", argv[i], runs_usage);
			rc = EXIT_USAGE;
		} else if (scan_given(&fs, argv[i]) < 0) {
			rc = EXIT_USAGE;
		} else {
			given = 1;
		}
	}
	if (rc < 0) {
		/* the runs given are named by the searched folders' runs of
		 * their names, asked too */
		ctl_found_ask(&fs, RUNS_TIMEOUT_S);
		ctl_found_search(&fs, !given, given ? same_name : NULL, &fs);
		ctl_found_ask(&fs, RUNS_TIMEOUT_S);
		ctl_found_handles(&fs);
		list(&fs, as_json);
		rc = EXIT_OK;
	}
	ctl_found_free(&fs);
	return rc;
}
