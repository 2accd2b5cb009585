/*
 * nscells.c - which cells' effects are in the worker's namespace.
 *
 * A fresh worker's namespace holds no cell's effects; a cell that ran
 * (to its end, an exception or an interrupt) adds its own; a cell killed
 * with its snapshot promoted adds nothing (the namespace is as before
 * it); a lost namespace starts over. Each record carries the set, so the
 * journal, --resume and the model see what the namespace holds.
 *
 * May include: runner_impl.h.
 */
#include "supervisor/run/runner_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
nscells_reset(struct runner *r)
{
	r->ns_n = 0;
}

void
nscells_add(struct runner *r, uint32_t n)
{
	struct ns_range *grown;
	size_t cap;

	if (r->ns_n > 0 && r->ns[r->ns_n - 1].hi + 1 == n) {
		r->ns[r->ns_n - 1].hi = n;
		return;
	}
	if (r->ns_n == r->ns_cap) {
		cap = r->ns_cap > 0 ? r->ns_cap * 2 : 8;
		if ((grown = realloc(r->ns, cap * sizeof *grown)) == NULL)
			return;	/* the record's set is then incomplete */
		r->ns = grown;
		r->ns_cap = cap;
	}
	r->ns[r->ns_n].lo = r->ns[r->ns_n].hi = n;
	r->ns_n++;
}

void
nscells_record(struct runner *r, struct cell *c)
{
	size_t i, len = 0, cap = r->ns_n * 24 + 1;
	char *s = malloc(cap);

	if (s == NULL)
		return;
	s[0] = '\0';
	for (i = 0; i < r->ns_n; i++) {
		const char *sep = i > 0 ? "," : "";

		if (r->ns[i].lo == r->ns[i].hi)
			len += (size_t)snprintf(s + len, cap - len, "%s%u",
			    sep, r->ns[i].lo);
		else
			len += (size_t)snprintf(s + len, cap - len,
			    "%s%u-%u", sep, r->ns[i].lo, r->ns[i].hi);
	}
	free(c->ns_cells);
	c->ns_cells = s;
}
