/*
 * ctlcli.c - `agentz ctl` and `agentz runs` (see ctlcli.h): short-lived
 * blocking clients, each request bounded by a timeout.
 *
 * agentz ctl exits 0 when the run answered ok, 1 when it answered with
 * an error, 2 for a usage error or no run to talk to.
 *
 * The replies are read with text/jsonf.h; the one place that writes a
 * reply back, agentz runs --json, adds "socket" to the reply's text.
 */
#include "supervisor/front/ctlcli.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/front/config.h"
#include "supervisor/text/jsonf.h"

#define REPLY_MAX (1 << 20)
#define CTL_TIMEOUT_S 10
#define RUNS_TIMEOUT_S 2
#define RUNS_MAX 256

static const char ctl_usage[] =
    "usage: agentz ctl RUN_OR_SOCKET COMMAND [ARGS]\n"
    "  RUN is a run's name (agentz runs lists them), or the path of its\n"
    "  control socket. COMMAND is one of:\n"
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
    "  folders and sockets given): name, state, cell, age, tokens, last\n"
    "  cell; --json prints one JSON object a line (the run's status and\n"
    "  \"socket\"; a socket nobody answers is \"state\": \"stale\")\n";

/* --- one request ---------------------------------------------------------------- */

static int
connect_to(const char *path, int timeout_s)
{
	struct timeval tv = { timeout_s, 0 };
	struct sockaddr_un sa;
	int fd, e;

	if (ctl_sockaddr(path, &sa) < 0)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Sends the line and its newline: fd_write_all writes with write(2),
 * which has no MSG_NOSIGNAL, so SIGPIPE is ignored while it does (a run
 * that refused us has closed: EPIPE, not death) and put back after. The
 * line is under CTL_LINE_MAX, which a fresh socket takes at once (the
 * loop's wait for POLLOUT, which ignores SO_SNDTIMEO, is not reached).
 */
static int
send_line(int fd, const char *line)
{
	struct sigaction ign, old;
	int rc, e;

	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	(void)sigemptyset(&ign.sa_mask);
	if (sigaction(SIGPIPE, &ign, &old) < 0)
		return -1;
	rc = fd_write_all(fd, line, strlen(line));
	if (rc == 0)
		rc = fd_write_all(fd, "\n", 1);
	e = errno;
	(void)sigaction(SIGPIPE, &old, NULL);
	errno = e;
	return rc;
}

/* The reply line (malloc'ed, no newline), or NULL with errno. */
static char *
read_line(int fd)
{
	struct buf b;
	char chunk[4096], *nl;
	ssize_t n;

	buf_init(&b);
	buf_set_max(&b, REPLY_MAX);
	for (;;) {
		n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || buf_append(&b, chunk, (size_t)n) < 0)
			break;
		if ((nl = memchr(b.data, '\n', b.len)) != NULL) {
			*nl = '\0';
			return buf_detach(&b, NULL);
		}
	}
	if (n == 0)
		errno = EPIPE;	/* closed without a reply */
	buf_clear(&b);
	return NULL;
}

/* Sends line (with its newline) to the socket at path; the reply or
 * NULL with errno. */
static char *
ask(const char *path, const char *line, int timeout_s)
{
	char *reply = NULL;
	int fd = connect_to(path, timeout_s), e;

	if (fd < 0)
		return NULL;
	/* a run that refuses us says why and closes at once: the reply may
	 * be there even when the request could not be sent */
	if (send_line(fd, line) == 0 || errno == EPIPE || errno == ECONNRESET)
		reply = read_line(fd);
	e = errno;
	(void)close(fd);
	errno = e;
	return reply;
}

/* --- agentz ctl --------------------------------------------------------------------- */

static int
is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* RUN's socket: a path as given, else NAME.sock or NAME/NAME.sock in the
 * search folders. malloc'ed or NULL. */
static char *
find_run(const char *run)
{
	char *dirs[3], *p = NULL;
	size_t n = ctl_search_dirs(dirs), i;

	if (strchr(run, '/') != NULL)
		p = strdup(run);
	for (i = 0; i < n; i++) {
		if (p == NULL && asprintf(&p, "%s/%s.sock", dirs[i], run) >= 0 &&
		    !is_socket(p)) {
			free(p);
			if (asprintf(&p, "%s/%s/%s.sock", dirs[i], run, run) < 0 ||
			    !is_socket(p)) {
				free(p);
				p = NULL;
			}
		}
		free(dirs[i]);
	}
	return p;
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
	if ((path = find_run(argv[1])) == NULL) {
		(void)fprintf(stderr, "agentz ctl: no run named '%s' (agentz "
		    "runs lists them; or give the socket's path)\n", argv[1]);
		return EXIT_USAGE;
	}
	line = request_line(argc - 2, argv + 2);
	if (line == NULL || strlen(line) >= CTL_LINE_MAX) {
		(void)fprintf(stderr, "agentz ctl: the request is over %d "
		    "bytes\n", CTL_LINE_MAX - 1);
		free(line);
		free(path);
		return EXIT_USAGE;
	}
	reply = ask(path, line, CTL_TIMEOUT_S);
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

struct found {
	char *path[RUNS_MAX];
	size_t n;
};

static void
add_found(struct found *f, const char *dir, const char *name)
{
	char *p;

	if (f->n < RUNS_MAX && asprintf(&p, "%s/%s", dir, name) >= 0) {
		if (is_socket(p))
			f->path[f->n++] = p;
		else
			free(p);
	}
}

static int
is_sock_name(const char *name)
{
	size_t n = strlen(name);

	return n > 5 && strcmp(name + n - 5, ".sock") == 0;
}

/* Sockets in dir, and in its folders one level down (a unit's
 * RuntimeDirectory=agentz/NAME). */
static void
scan(struct found *f, const char *dir, int depth)
{
	struct dirent *de;
	struct stat st;
	char *sub;
	DIR *d;

	if (is_socket(dir)) {
		if (f->n < RUNS_MAX && (f->path[f->n] = strdup(dir)) != NULL)
			f->n++;
		return;
	}
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (is_sock_name(de->d_name)) {
			add_found(f, dir, de->d_name);
		} else if (depth == 0 && asprintf(&sub, "%s/%s", dir,
		    de->d_name) >= 0) {
			if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
				scan(f, sub, 1);
			free(sub);
		}
	}
	(void)closedir(d);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * A JSON object's text (a reply jf_parse took) with "socket" added last,
 * by hand: jsonf reads chosen fields into C and writes objects from
 * fields, but cannot take an object whole and add one to it (the status
 * has more fields than a row shows, and may grow). A run writes its
 * replies compact, as jansson (under jf_dumps) does, so the text is what
 * re-encoding the parsed object gave before: {...} becomes
 * {...,"socket":"PATH"}. NULL when out of memory.
 */
static char *
with_socket(const char *reply, const char *path)
{
	struct jf f[] = { JF_S("socket", path), JF_END };
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

/* The run's status with "socket" (JSON text), or a stand-in saying why
 * none came. */
static char *
status_of(const char *path)
{
	char *reply = ask(path, "status", RUNS_TIMEOUT_S), *s;
	const char *base = strrchr(path, '/');
	struct jf_in none[] = { { .key = NULL } };
	char name[256];
	int e = errno;

	if (reply != NULL && jf_parse(reply, strlen(reply), none) == 0) {
		s = with_socket(reply, path);
		free(reply);
		return s;
	}
	free(reply);
	(void)snprintf(name, sizeof name, "%s", base != NULL ? base + 1 : path);
	if (strlen(name) > 5)
		name[strlen(name) - 5] = '\0';	/* ".sock" */
	return jf_dumps((struct jf[]){ JF_S("name", name),
	    JF_S("socket", path), JF_S("state", e == ECONNREFUSED ||
	    e == ENOENT ? "stale" : e == EACCES ? "denied" : "no-answer"),
	    JF_S("error", strerror(e)), JF_END }, NULL);
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
	char *name, *state, *last, *error;
	long long cell_n;
	double age_s, tokens_used;
};

/* One row of agentz runs from the JSON text of status_of. */
static void
print_line(const char *status)
{
	struct row w = { .cell_n = 0 };
	struct jf_in cell[] = {
		{ .key = "n", .kind = JF_KINT, .dst = &w.cell_n },
		{ .key = NULL }
	}, tok[] = {
		{ .key = "used", .kind = JF_KREAL, .dst = &w.tokens_used },
		{ .key = NULL }
	}, in[] = {
		{ .key = "name", .kind = JF_KSTR, .dst = &w.name },
		{ .key = "state", .kind = JF_KSTR, .dst = &w.state },
		{ .key = "cell", .kind = JF_KOBJ, .sub = cell },
		{ .key = "age_s", .kind = JF_KREAL, .dst = &w.age_s },
		{ .key = "tokens", .kind = JF_KOBJ, .sub = tok },
		{ .key = "last", .kind = JF_KSTR, .dst = &w.last },
		{ .key = "error", .kind = JF_KSTR, .dst = &w.error },
		{ .key = NULL }
	};
	char c[16] = "-", age[16], tokens[48] = "-";

	if (jf_parse(status, strlen(status), in) < 0)
		return;
	if (in[2].found == 1)
		(void)snprintf(c, sizeof c, "%lld", w.cell_n);
	human_age(in[3].found == 1 ? w.age_s : -1, age, sizeof age);
	if (in[4].found == 1)
		(void)snprintf(tokens, sizeof tokens, "%.0f", w.tokens_used);
	(void)printf("%-24s %-13s %-5s %-6s %-10s %s\n", w.name, w.state, c,
	    age, tokens, w.last != NULL ? w.last : w.error != NULL ? w.error :
	    "-");
	jf_in_free(in);
}

static void
list(struct found *f, int as_json)
{
	char *s;
	size_t i;

	qsort(f->path, f->n, sizeof f->path[0], cmp_str);
	if (!as_json && f->n > 0)
		(void)printf("%-24s %-13s %-5s %-6s %-10s %s\n", "NAME", "STATE",
		    "CELL", "AGE", "TOKENS", "LAST");
	for (i = 0; i < f->n; i++) {
		if ((i > 0 && strcmp(f->path[i], f->path[i - 1]) == 0) ||
		    (s = status_of(f->path[i])) == NULL)
			continue;
		if (as_json)
			(void)printf("%s\n", s);
		else
			print_line(s);
		free(s);
	}
	for (i = 0; i < f->n; i++)
		free(f->path[i]);
}

int
ctlcli_runs_main(int argc, char **argv)
{
	struct found f = { .n = 0 };
	char *dirs[3];
	int as_json = 0, i, given = 0;
	size_t n, k;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			as_json = 1;
		} else if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			(void)fputs(runs_usage, stdout);
			while (f.n > 0)		/* the runs found before it */
				free(f.path[--f.n]);
			return EXIT_OK;
		} else if (argv[i][0] == '-') {
			(void)fprintf(stderr, "agentz runs: unknown option '%s'\n"
			    "%s", argv[i], runs_usage);
			while (f.n > 0)
				free(f.path[--f.n]);
			return EXIT_USAGE;
		} else {
			scan(&f, argv[i], 0);
			given = 1;
		}
	}
	if (!given) {
		n = ctl_search_dirs(dirs);
		for (k = 0; k < n; k++) {
			scan(&f, dirs[k], 0);
			free(dirs[k]);
		}
	}
	list(&f, as_json);
	if (f.n == 0 && !as_json)
		(void)fprintf(stderr, "agentz runs: no runs found\n");
	return EXIT_OK;
}
