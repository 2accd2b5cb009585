/*
 * ctlline.c - the control socket's request line (see ctl.h): a table of
 * commands, a strict check of the bytes, no allocation.
 */
#include "supervisor/ctl/ctl.h"

#include <stdio.h>
#include <string.h>

#include "supervisor/text/utf8.h"

enum arg_rule { ARG_NONE, ARG_TEXT, ARG_ANY };

static const struct command {
	const char *word;
	enum ctl_cmd cmd;
	enum arg_rule arg;
} commands[] = {
	{ "status", CTL_STATUS, ARG_NONE },
	{ "note", CTL_NOTE, ARG_TEXT },
	{ "stop", CTL_STOP, ARG_NONE },
	{ "stop --now", CTL_STOP_NOW, ARG_NONE },
	{ "pause", CTL_PAUSE, ARG_NONE },
	{ "resume", CTL_RESUME, ARG_NONE },
	{ "kill-cell", CTL_KILL_CELL, ARG_NONE },
	{ "budgets", CTL_BUDGETS, ARG_ANY },
	{ "allow", CTL_ALLOW, ARG_TEXT },
	{ "deny", CTL_DENY, ARG_TEXT },
	{ "network", CTL_NETWORK, ARG_NONE },
	{ "approve", CTL_APPROVE, ARG_TEXT },
	{ "reject", CTL_REJECT, ARG_TEXT },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

const char *
ctl_cmd_name(enum ctl_cmd cmd)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (commands[i].cmd == cmd)
			return commands[i].word;
	return "?";
}

/* 0 when line is UTF-8 text without control characters (tab allowed). */
static int
check_text(const char *line, size_t n, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)line;
	size_t i = 0, k;

	while (i < n) {
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) {
			(void)snprintf(err, errlen, "control character 0x%02x at "
			    "byte %zu: a request is one line of text", p[i], i);
			return -1;
		}
		if ((k = utf8_seq_len(p + i, n - i)) == 0) {
			(void)snprintf(err, errlen, "byte 0x%02x at %zu is not "
			    "UTF-8", p[i], i);
			return -1;
		}
		i += k;
	}
	return 0;
}

static size_t
skip_blanks(const char *p, size_t i, size_t n)
{
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	return i;
}

/*
 * How many bytes of line the command's words take ("stop   --now" is
 * "stop --now"), followed by the line's end or a blank; 0 if they differ.
 */
static size_t
match(const char *line, size_t n, const char *word)
{
	size_t i = 0;

	for (; *word != '\0'; word++) {
		if (*word == ' ') {
			if (i >= n || (line[i] != ' ' && line[i] != '\t'))
				return 0;
			i = skip_blanks(line, i, n);
		} else if (i >= n || line[i++] != *word) {
			return 0;
		}
	}
	return i == n || line[i] == ' ' || line[i] == '\t' ? i : 0;
}

/* The command that starts line, the longest match ("stop --now" over
 * "stop"); *used is how many bytes its words take. */
static const struct command *
find(const char *line, size_t n, size_t *used)
{
	const struct command *best = NULL;
	size_t i, w;

	*used = 0;
	for (i = 0; i < NCOMMANDS; i++) {
		if ((w = match(line, n, commands[i].word)) > *used) {
			best = &commands[i];
			*used = w;
		}
	}
	return best;
}

int
ctl_parse(const char *line, size_t n, struct ctl_req *q, char *err,
    size_t errlen)
{
	const struct command *c;
	size_t start, end, w;

	if (check_text(line, n, err, errlen) < 0)
		return -1;
	start = skip_blanks(line, 0, n);
	end = n;
	while (end > start && (line[end - 1] == ' ' || line[end - 1] == '\t'))
		end--;
	if ((c = find(line + start, end - start, &w)) == NULL) {
		(void)snprintf(err, errlen, "unknown command '%.*s' (status, "
		    "note TEXT, stop, stop --now, pause, resume, kill-cell, "
		    "budgets [OPTIONS], allow HOST, deny HOST, network, "
		    "approve [--always] ID, reject ID)",
		    (int)(end - start > 40 ? 40 : end - start), line + start);
		return -1;
	}
	w += start;
	memset(q, 0, sizeof *q);
	q->cmd = c->cmd;
	w = skip_blanks(line, w, end);
	if (c->arg == ARG_NONE && w < end) {
		(void)snprintf(err, errlen, "'%s' takes no argument (got "
		    "'%.*s')", c->word, (int)(end - w > 40 ? 40 : end - w),
		    line + w);
		return -1;
	}
	if (c->arg == ARG_TEXT && w == end) {
		(void)snprintf(err, errlen, "'%s' needs a text", c->word);
		return -1;
	}
	if (c->arg != ARG_NONE) {
		q->arg = line + w;
		q->arg_len = end - w;
	}
	return 0;
}
