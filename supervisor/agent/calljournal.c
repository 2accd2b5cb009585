/*
 * calljournal.c - the model calls in flight, in the journal, so a call
 * cut by a supervisor SIGKILL is still counted on --resume: its start
 * ({"type":"call","id":n,"estimated":t}, the request's bytes / 4), its
 * streamed estimate again each time it grew by an eighth (at least
 * CALL_STEP tokens: a few records per call, however long), and its end
 * in the usage record that counts it ("calls":[n]). A call whose end is
 * not journaled counts its last estimate on resume, and the resumed run
 * settles it in one usage record (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"
#include "supervisor/text/jsonf.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "supervisor/agent/price.h"

#define CALL_STEP 256	/* tokens: about 1 KiB of stream */

static long long
estimate(size_t bytes)
{
	return (long long)((bytes + 3) / 4);
}

static void
journal_mark(struct agent *a, struct call_mark *m, long long est)
{
	struct jf f[] = { JF_I("id", m->id), JF_I("estimated", est), JF_END };

	m->journaled = est;
	(void)agent_record(a, "call", f);
}

void
agent_call_opened(struct agent *a, struct call_mark *m, size_t sent)
{
	m->id = -1;
	if (a->journal == NULL || a->journal_ended)
		return;
	m->id = a->call_seq++;
	journal_mark(a, m, estimate(sent));
}

void
agent_call_grew(struct agent *a, struct call_mark *m, size_t bytes)
{
	long long est = estimate(bytes), step = m->journaled / 8;

	if (m->id < 0 || a->journal_ended)
		return;
	if (est - m->journaled >= (step > CALL_STEP ? step : CALL_STEP))
		journal_mark(a, m, est);
}

/*
 * The calls the journal started and never settled, after its last usage
 * record: their ids (an array) and, in *tokens, their last estimates.
 * Also sets a->call_seq past every id the journal used.
 */
static json_t *
unsettled(struct agent *a, long long *tokens)
{
	json_t *open = json_object(), *r, *ids, *v;
	const char *type, *key;
	char k[24];
	size_t i, n;
	json_int_t id;

	json_array_foreach(a->records, i, r) {
		type = json_string_value(json_object_get(r, "type"));
		if (strcmp(type, "call") == 0) {
			id = json_integer_value(json_object_get(r, "id"));
			(void)snprintf(k, sizeof k, "%lld", (long long)id);
			(void)json_object_set(open, k, json_object_get(r,
			    "estimated"));
			if (id >= a->call_seq)
				a->call_seq = id + 1;
		} else if (strcmp(type, "usage") == 0) {
			json_array_foreach(json_object_get(r, "calls"), n, v) {
				(void)snprintf(k, sizeof k, "%lld", (long long)
				    json_integer_value(v));
				(void)json_object_del(open, k);
			}
		}
	}
	ids = json_array();
	*tokens = 0;
	json_object_foreach(open, key, v) {
		*tokens += json_integer_value(v);
		(void)json_array_append_new(ids, json_integer(strtoll(key,
		    NULL, 10)));
	}
	json_decref(open);
	return ids;
}

/*
 * --resume: the calls cut by the restart count their last estimates (as
 * output tokens, the dearest kind, like every estimate), settled at once
 * in a usage record.
 */
void
agent_settle_cut_calls(struct agent *a)
{
	long long est, *cut;
	json_t *ids = unsettled(a, &est);
	size_t i, n;

	if (json_array_size(ids) == 0) {
		json_decref(ids);
		return;
	}
	a->tokens_base += est;
	if (a->priced)
		a->cost_base += price_cost(&a->price, 0, 0, est);
	a->tokens_journaled = a->tokens_base;
	log_warnx("--resume: %zu model call%s cut by the restart: %lld "
	    "estimated tokens counted", json_array_size(ids),
	    json_array_size(ids) == 1 ? " was" : "s were", est);
	n = json_array_size(ids);
	if ((cut = calloc(n, sizeof *cut)) != NULL) {
		for (i = 0; i < n; i++)
			cut[i] = json_integer_value(json_array_get(ids, i));
		agent_record_usage(a, a->tokens_base, est, cut, n, a->cost_base);
	}
	free(cut);
	json_decref(ids);
}
