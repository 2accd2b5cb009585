/*
 * termout.h - what of a cell's output may reach a terminal, and model text
 * made visible.
 *
 * A cell's output written to a terminal keeps plain text, \n, \t and SGR
 * colour sequences (ESC [ digits ; : m); every other escape sequence (OSC
 * window titles, cursor motion, DCS ...) and control character is dropped.
 * A lone \r (not followed by \n) becomes \n: a progress bar becomes lines
 * instead of overwriting what is on the screen, and a cell cannot overwrite
 * a line in place to forge one. C1 controls (U+0080-U+009F in UTF-8, and
 * stray 0x80-0x9F bytes) are dropped. The filter works across chunks of
 * any size; when stdout is not a terminal nothing is filtered.
 */
#ifndef AGENTZ_TERMOUT_H
#define AGENTZ_TERMOUT_H

#include <stddef.h>

/* Output beyond the input size a feed or flush may write. */
#define TERMOUT_SLACK	80

/* Filter state of one stream; zero it (or termout_init) to start. */
struct termout {
	int state;
	size_t seq_len;		/* bytes of the sequence in seq */
	char seq[64];		/* an SGR sequence being collected */
	size_t str_len;		/* bytes of a string sequence swallowed */
	int cont;		/* UTF-8 continuation bytes still expected */
	int lead_c2;		/* the last byte was 0xC2 (held back) */
	int cr;			/* a \r held back */
	int coloured;		/* an SGR went out since the last flush */
};

void termout_init(struct termout *t);

/*
 * Filters p[0..n) into out, which must have room for n + TERMOUT_SLACK bytes.
 * Returns the bytes written to out.
 */
size_t termout_feed(struct termout *t, const char *p, size_t n, char *out);

/*
 * End of the stream (the cell ended): a held \r comes out as \n, an
 * unfinished sequence is dropped, and colours are reset if any were set.
 * out needs TERMOUT_SLACK bytes; returns the bytes written.
 */
size_t termout_flush(struct termout *t, char *out);

/*
 * A copy of p[0..n) safe for a terminal, systemd or a log line: control
 * characters become visible escapes (\x1b, \r, \n, \u009b ...), so model
 * text cannot move the cursor, set a title or start a new line or
 * assignment. multiline keeps \n and \t as they are. NUL-terminated,
 * malloc'ed; NULL / ENOMEM.
 */
char *termout_visible(const char *p, size_t n, int multiline);

#endif
