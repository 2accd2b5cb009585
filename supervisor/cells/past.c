/*
 * past.c - the journal read back (--resume), typed (see past.h): the
 * records journal_load checked, kept as JSON here (cells/ owns their
 * form) and given to the agent as plain values.
 */
#include "supervisor/cells/past.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "supervisor/cells/cells.h"
#include "supervisor/cells/record_json.h"

struct journal_past {
	const struct journal *j;
	char *path;
	json_t *records;	/* journal_load's array */
	/* the last record of a type per cell number ("%lld" keys) */
	json_t *in, *out, *succ;
	/* the notes after the last note_delivered (the records' strings) */
	const char **notes;
	size_t nnotes;
	/* the calls never settled, their last estimates, the next id */
	long long *cut, cut_tokens, next_call;
	size_t ncut;
};

static const char *
type_of(const json_t *rec)
{
	const char *t = json_string_value(json_object_get(rec, "type"));

	return t != NULL ? t : "";
}

static const json_t *
find_type(const json_t *records, const char *type, int last)
{
	const json_t *r, *found = NULL;
	size_t i;

	json_array_foreach(records, i, r) {
		if (strcmp(type_of(r), type) == 0) {
			found = r;
			if (!last)
				break;
		}
	}
	return found;
}

/* The journal's records of one type by cell number (the last one of
 * each cell), as an object. */
static json_t *
by_cell(const json_t *records, const char *type)
{
	json_t *o = json_object(), *r;
	char key[24];
	size_t i;

	json_array_foreach(records, i, r) {
		if (strcmp(type_of(r), type) != 0)
			continue;
		(void)snprintf(key, sizeof key, "%lld", (long long)
		    json_integer_value(json_object_get(r, "cell")));
		if (json_object_set(o, key, r) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* The notes no model request carried: after the last note_delivered. */
static int
find_notes(struct journal_past *p)
{
	const json_t *r, *text;
	size_t i, from = 0, n = json_array_size(p->records);

	json_array_foreach(p->records, i, r)
		if (strcmp(type_of(r), "note_delivered") == 0)
			from = i + 1;
	if ((p->notes = calloc(n - from + 1, sizeof *p->notes)) == NULL)
		return -1;
	for (i = from; i < n; i++) {
		r = json_array_get(p->records, i);
		text = json_object_get(r, "text");
		if (strcmp(type_of(r), "note") == 0 && json_is_string(text))
			p->notes[p->nnotes++] = json_string_value(text);
	}
	return 0;
}

/* Ids of open calls, in the order they were first opened. */
static int
ids_of(struct journal_past *p, json_t *open)
{
	const char *key;
	json_t *v;

	p->ncut = 0;
	if ((p->cut = calloc(json_object_size(open) + 1,
	    sizeof *p->cut)) == NULL)
		return -1;
	json_object_foreach(open, key, v) {
		p->cut_tokens += json_integer_value(v);
		p->cut[p->ncut++] = strtoll(key, NULL, 10);
	}
	return 0;
}

/*
 * The calls the journal started and never settled (a "call" record with
 * no later "usage" record listing it): their ids and their last
 * estimates; and the id after every one the journal used.
 */
static int
unsettled(struct journal_past *p)
{
	json_t *open = json_object(), *r, *v;
	const char *type;
	char k[24];
	size_t i, n;
	json_int_t id;
	int rc;

	if (open == NULL)
		return -1;
	json_array_foreach(p->records, i, r) {
		type = type_of(r);
		if (strcmp(type, "call") == 0) {
			id = json_integer_value(json_object_get(r, "id"));
			(void)snprintf(k, sizeof k, "%lld", (long long)id);
			(void)json_object_set(open, k, json_object_get(r,
			    "estimated"));
			if (id >= p->next_call)
				p->next_call = id + 1;
		} else if (strcmp(type, "usage") == 0) {
			json_array_foreach(json_object_get(r, "calls"), n, v) {
				(void)snprintf(k, sizeof k, "%lld", (long long)
				    json_integer_value(v));
				(void)json_object_del(open, k);
			}
		}
	}
	rc = ids_of(p, open);
	json_decref(open);
	return rc;
}

struct journal_past *
journal_past_load(const struct journal *j, const char *path, char **err)
{
	struct journal_past *p = calloc(1, sizeof *p);

	*err = NULL;
	if (p == NULL)
		return NULL;
	p->j = j;
	if ((p->records = journal_load(j, path, err)) == NULL) {
		free(p);
		return NULL;
	}
	if ((p->path = strdup(path)) == NULL ||
	    (p->in = by_cell(p->records, "input")) == NULL ||
	    (p->out = by_cell(p->records, "output")) == NULL ||
	    (p->succ = by_cell(p->records, "successor")) == NULL ||
	    find_notes(p) < 0 || unsettled(p) < 0) {
		journal_past_free(p);
		return NULL;	/* *err NULL: out of memory */
	}
	return p;
}

void
journal_past_free(struct journal_past *p)
{
	if (p == NULL)
		return;
	json_decref(p->records);
	json_decref(p->in);
	json_decref(p->out);
	json_decref(p->succ);
	free(p->notes);
	free(p->cut);
	free(p->path);
	free(p);
}

int
journal_past_empty(const struct journal_past *p)
{
	return json_array_size(p->records) == 0;
}

const char *
journal_past_task(const struct journal_past *p, double *at)
{
	const json_t *run = find_type(p->records, "run", 0);

	*at = json_number_value(json_object_get(run, "at"));
	return json_string_value(json_object_get(run, "task"));
}

long long
journal_past_tokens(const struct journal_past *p)
{
	const json_t *usage = find_type(p->records, "usage", 1);

	return json_integer_value(json_object_get(usage, "tokens"));
}

int
journal_past_cost(const struct journal_past *p, double *usd)
{
	const json_t *usage = find_type(p->records, "usage", 1);
	const json_t *cost = json_object_get(usage, "cost");

	if (!json_is_number(cost))
		return 0;
	*usd = json_number_value(cost);
	return 1;
}

size_t
journal_past_resumes(const struct journal_past *p)
{
	const json_t *r;
	size_t i, n = 0;

	json_array_foreach(p->records, i, r)
		n += strcmp(type_of(r), "resume") == 0;
	return n;
}

int
journal_past_ended(const struct journal_past *p, long long *rc,
    const char **reason)
{
	size_t n = json_array_size(p->records);
	const json_t *last = n > 0 ? json_array_get(p->records, n - 1) : NULL;

	if (last == NULL || strcmp(type_of(last), "stop") != 0)
		return 0;
	*rc = json_integer_value(json_object_get(last, "exit"));
	*reason = json_string_value(json_object_get(last, "reason"));
	return 1;
}

const char *
journal_past_operator_stop(const struct journal_past *p)
{
	const json_t *r;
	const char *cmd;
	size_t i;

	json_array_foreach(p->records, i, r) {
		cmd = json_string_value(json_object_get(r, "command"));
		if (strcmp(type_of(r), "operator") == 0 && cmd != NULL &&
		    strncmp(cmd, "stop", 4) == 0)
			return cmd;
	}
	return NULL;
}

/* rec's integer key, or otherwise when it has none. */
static long long
int_or(const json_t *rec, const char *key, long long otherwise)
{
	const json_t *v = json_object_get(rec, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) :
	    otherwise;
}

int
journal_past_budgets(const struct journal_past *p, struct past_budgets *b)
{
	const json_t *r = find_type(p->records, "budgets", 1);

	if (r == NULL)
		return 0;
	b->max_cells = json_integer_value(json_object_get(r, "max_cells"));
	b->max_tokens = json_integer_value(json_object_get(r, "max_tokens"));
	b->max_same_failure = int_or(r, "max_same_failure", -1);
	b->max_parallel_calls = int_or(r, "max_parallel_calls", -1);
	b->max_egress_bytes = int_or(r, "max_egress_bytes", -1);
	b->deadline = json_number_value(json_object_get(r, "deadline"));
	b->max_cost = json_number_value(json_object_get(r, "max_cost"));
	b->at = json_number_value(json_object_get(r, "at"));
	b->by = json_string_value(json_object_get(r, "by"));
	return 1;
}

int
journal_past_egress(const struct journal_past *p, size_t i,
    const char **command, const char **entry)
{
	const json_t *r;
	size_t k, seen = 0;

	json_array_foreach(p->records, k, r) {
		if (strcmp(type_of(r), "egress_policy") != 0 || seen++ < i)
			continue;
		*command = json_string_value(json_object_get(r, "command"));
		*entry = json_string_value(json_object_get(r, "entry"));
		return 1;
	}
	return 0;
}

uint64_t
journal_past_egress_bytes(const struct journal_past *p)
{
	const json_t *r;
	const char *what;
	uint64_t sum = 0;
	long long up, down;
	size_t k;

	json_array_foreach(p->records, k, r) {
		what = json_string_value(json_object_get(r, "what"));
		if (strcmp(type_of(r), "egress") != 0 || what == NULL ||
		    strcmp(what, "closed") != 0)
			continue;
		up = int_or(r, "up", 0);
		down = int_or(r, "down", 0);
		sum += (uint64_t)(up > 0 ? up : 0) + (uint64_t)(down > 0 ?
		    down : 0);
	}
	return sum;
}

struct cell *
journal_past_cell(const struct journal_past *p, struct cells *h, size_t n,
    int *finished)
{
	const json_t *in, *out;
	json_t *i, *o;
	struct cell *c = NULL;
	char key[24];
	uint64_t off;
	size_t len;

	(void)snprintf(key, sizeof key, "%zu", n);
	in = json_object_get(p->in, key);
	out = json_object_get(p->out, key);
	i = in != NULL ? journal_full(p->j, in) : NULL;
	o = out != NULL ? journal_full(p->j, out) : NULL;
	if (in != NULL && (i == NULL || (out != NULL && o == NULL)))
		log_warn("--resume: cannot read cell records back from %s",
		    p->path);
	else if (i != NULL)
		c = cells_restore(h, i, o);
	json_decref(i);
	json_decref(o);
	if (c == NULL)
		return NULL;
	*finished = out != NULL;
	/* only their places stay in memory: the history reads them back */
	if (journal_where(in, &off, &len) == 0)
		cells_journaled(h, c, 0, p->j, off, len);
	if (out != NULL && journal_where(out, &off, &len) == 0)
		cells_journaled(h, c, 1, p->j, off, len);
	return c;
}

int
journal_past_successor(const struct journal_past *p, uint32_t n,
    struct past_successor *s)
{
	const json_t *r, *code, *repair;
	char key[24];

	(void)snprintf(key, sizeof key, "%u", n);
	if ((r = json_object_get(p->succ, key)) == NULL)
		return 0;
	code = json_object_get(r, "code");
	repair = json_object_get(r, "repair");
	s->code = json_string_value(code);
	s->len = json_string_length(code);
	s->summary = json_string_value(json_object_get(r, "summary"));
	s->repair = json_is_true(repair) ? PAST_REPAIR_YES :
	    json_is_false(repair) ? PAST_REPAIR_NO : PAST_REPAIR_UNSAID;
	return 1;
}

const char *
journal_past_note(const struct journal_past *p, size_t i)
{
	return i < p->nnotes ? p->notes[i] : NULL;
}

size_t
journal_past_cut_calls(const struct journal_past *p, const long long **ids,
    long long *tokens)
{
	*ids = p->cut;
	*tokens = p->cut_tokens;
	return p->ncut;
}

long long
journal_past_next_call(const struct journal_past *p)
{
	return p->next_call;
}
