/*
 * outcell.c - a cell's live output through the gate (see out.h): whole
 * while it fits, dropped a line at a time while the reader stalls; on a
 * terminal through the cell's terminal filter.
 */
#include "supervisor/ui/out.h"

#include <string.h>

#include "supervisor/text/termout.h"
#include "supervisor/ui/out_int.h"

/*
 * Where to cut p before k when no line ends there: not inside an escape
 * sequence (only SGR, ESC [ ... m, passes the terminal filter) nor inside
 * a UTF-8 character.
 */
static size_t
safe_cut(const char *p, size_t k)
{
	size_t i, lim = k > 64 ? k - 64 : 0, cut = k;

	for (i = k; i > lim; i--)
		if (p[i - 1] == 0x1b) {
			if (memchr(p + i, 'm', k - i) == NULL)
				cut = i - 1;	/* the sequence is not whole */
			break;
		}
	for (i = 0; i < 3 && cut > 0 && ((unsigned char)p[cut] & 0xc0) ==
	    0x80; i++)
		cut--;
	return cut;
}

/* Live output: whole while it fits, dropped a line at a time while the
 * reader stalls, counted. */
void
out_put_live(struct outq *q, const char *p, size_t n)
{
	const char *nl;
	size_t k, room;

	while (n > 0 && q->mode != M_BROKEN) {
		if (q->dropping) {
			if (q->in_bol && outq_len(q) <= OUT_QUEUE_MAX / 2) {
				out_resume(q);
				continue;
			}
			nl = memchr(p, '\n', n);
			k = nl != NULL ? (size_t)(nl - p) + 1 : n;
			q->dropped += k;
			q->in_bol = nl != NULL;
			p += k;
			n -= k;
			continue;
		}
		if (outq_len(q) == 0) {
			k = out_try_write(q, p, n);
			if (k > 0)
				q->tail_nl = p[k - 1] == '\n';
			p += k;
			n -= k;
			if (n == 0)
				break;
		}
		room = outq_len(q) < OUT_QUEUE_MAX ?
		    OUT_QUEUE_MAX - outq_len(q) : 0;
		if (n <= room) {
			out_append(q, p, n);
			break;
		}
		/* keep whole lines that fit, drop from a line start on;
		 * a line begun before and longer than the room is cut
		 * where it is safe */
		for (k = room; k > 0 && p[k - 1] != '\n'; k--)
			;
		if (k == 0 && !q->tail_nl)
			k = safe_cut(p, room);
		out_append(q, p, k);
		p += k;
		n -= k;
		q->dropping = 1;
		q->in_bol = q->tail_nl;	/* p now starts a line? */
	}
	out_pump(q);
}

void
out_cell(int stream, const char *p, size_t n)
{
	struct outq *q = out_queue(stream);
	struct termout *t = &outs.tf[stream == 1 ? 1 : 2];
	char buf[4096 + TERMOUT_SLACK];
	size_t k, m;

	if (q->mode == M_BROKEN)
		return;
	if (q->mode == M_DIRECT && !q->tty) {
		(void)out_try_write(q, p, n);
		return;
	}
	if (!q->tty) {
		out_put_live(q, p, n);
		return;
	}
	while (n > 0) {
		k = n < 4096 ? n : 4096;
		m = termout_feed(t, p, k, buf);
		out_put_live(q, buf, m);
		p += k;
		n -= k;
	}
}

void
out_cell_end(void)
{
	char buf[TERMOUT_SLACK];
	size_t m;
	int s;

	for (s = 1; s <= 2; s++) {
		if (!out_queue(s)->tty)
			continue;
		m = termout_flush(&outs.tf[s], buf);
		out_put_live(out_queue(s), buf, m);
	}
}
