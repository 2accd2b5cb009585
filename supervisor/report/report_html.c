/*
 * report_html.c - every byte of the page goes out through these
 * (report_int.h): our own markup as it is, and anything from the journal
 * escaped, its invalid UTF-8 replaced and its control characters made
 * visible, so no journal text can become markup, a script or a URL.
 * Write errors are left in the FILE for the caller's ferror().
 */
#include "supervisor/report/report_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "supervisor/text/utf8.h"

void
html_raw(FILE *f, const char *markup)
{
	(void)fputs(markup, f);
}

void
html_fmt(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vfprintf(f, fmt, ap);
	va_end(ap);
}

/* One byte of valid UTF-8 text, escaped. */
static void
esc_byte(FILE *f, unsigned char b, unsigned char next)
{
	switch (b) {
	case '&': html_raw(f, "&amp;"); return;
	case '<': html_raw(f, "&lt;"); return;
	case '>': html_raw(f, "&gt;"); return;
	case '"': html_raw(f, "&quot;"); return;
	case '\'': html_raw(f, "&#39;"); return;
	case '\n': case '\t': (void)fputc(b, f); return;
	case '\r':		/* \r\n is a line break; a lone \r is shown */
		if (next != '\n')
			html_raw(f, "\\r");
		return;
	default:
		break;
	}
	if (b < 0x20 || b == 0x7f)
		html_fmt(f, "\\x%02x", b);
	else
		(void)fputc(b, f);
}

void
html_text(FILE *f, const char *s, size_t n)
{
	size_t len, i;
	char *clean;

	if (s == NULL || n == 0)
		return;
	if ((clean = utf8_sanitize(s, n, &len)) == NULL)
		fatalx("report: out of memory (%zu bytes of text)", n);
	for (i = 0; i < len; i++)
		esc_byte(f, (unsigned char)clean[i], i + 1 < len ?
		    (unsigned char)clean[i + 1] : 0);
	free(clean);
}

void
html_str(FILE *f, const char *s)
{
	if (s != NULL)
		html_text(f, s, strlen(s));
}

/* Where a cut near at lands on a character boundary of s[0..n). */
static size_t
boundary(const char *s, size_t n, size_t at)
{
	int back = 0;

	while (at > 0 && at < n && back < 3 &&
	    ((unsigned char)s[at] & 0xc0) == 0x80) {
		at--;
		back++;
	}
	return at;
}

void
html_capped(FILE *f, const char *s, size_t n, size_t cap)
{
	size_t head, tail;

	if (n <= cap) {
		html_text(f, s, n);
		return;
	}
	head = boundary(s, n, cap - cap / 4);
	tail = boundary(s, n, n - cap / 4);
	html_text(f, s, head);
	html_fmt(f, "<span class=\"cut\">[%zu bytes not shown]</span>",
	    tail - head);
	html_text(f, s + tail, n - tail);
}

void
html_json(FILE *f, const json_t *v, size_t cap)
{
	char *text;

	if (json_is_string(v)) {
		html_capped(f, json_string_value(v), json_string_length(v),
		    cap);
		return;
	}
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (text != NULL)
		html_capped(f, text, strlen(text), cap);
	free(text);
}

void
html_time(FILE *f, double wall)
{
	time_t t = (time_t)wall;
	struct tm tm;
	char buf[40];

	if (wall <= 0 || gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		html_raw(f, "?");
	else
		html_raw(f, buf);
}

void
html_dur(FILE *f, double secs)
{
	if (secs < 0)
		html_raw(f, "?");
	else if (secs < 1)
		html_fmt(f, "%.0f ms", secs * 1e3);
	else if (secs < 120)
		html_fmt(f, "%.1f s", secs);
	else if (secs < 1e9)
		html_fmt(f, "%lld min %02d s", (long long)(secs / 60),
		    (int)(secs - 60.0 * (double)(long long)(secs / 60)));
	else
		html_raw(f, "?");
}

void
html_kb(FILE *f, long long kb)
{
	if (kb < 0)
		html_raw(f, "?");
	else if (kb < 1024)
		html_fmt(f, "%lld kB", kb);
	else if (kb < 1024 * 1024)
		html_fmt(f, "%.1f MB", (double)kb / 1024);
	else
		html_fmt(f, "%.2f GB", (double)kb / (1024 * 1024));
}

const char *
html_class(const char *name)
{
	static const char *const known[] = {
		"ok", "error", "interrupted", "exited", "running",
		"exception", "no_successor", "timeout", "memory", "crashed",
		"protocol", "restart", "stopped",
	};
	size_t i;

	for (i = 0; name != NULL && i < sizeof known / sizeof known[0]; i++)
		if (strcmp(name, known[i]) == 0)
			return known[i];
	return "other";
}
