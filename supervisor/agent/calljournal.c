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

#include "common/log.h"
#include "supervisor/agent/price.h"
#include "supervisor/cells/past.h"

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
 * --resume: the calls cut by the restart (started in the journal, never
 * settled by a usage record) count their last estimates (as output
 * tokens, the dearest kind, like every estimate), settled at once in a
 * usage record. The next call's id follows every id the journal used.
 */
void
agent_settle_cut_calls(struct agent *a)
{
	const long long *cut;
	long long est, next = journal_past_next_call(a->past);
	size_t n = journal_past_cut_calls(a->past, &cut, &est);

	if (next > a->call_seq)
		a->call_seq = next;
	if (n == 0)
		return;
	a->tokens_base += est;
	if (a->priced)
		a->cost_base += price_cost(&a->price, 0, 0, est);
	a->tokens_journaled = a->tokens_base;
	log_warnx("--resume: %zu model call%s cut by the restart: %lld "
	    "estimated tokens counted", n, n == 1 ? " was" : "s were", est);
	agent_record_usage(a, a->tokens_base, est, cut, n, a->cost_base);
}
