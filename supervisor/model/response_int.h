/*
 * response_int.h - private to the stream assembler's files: response.c
 * (event dispatch, handlers, the delta fast path, feeding), response_item.c
 * (output items, streamed-string accumulators, the assembled result) and
 * response_msg.c (status, messages, usage, the getters, HTTP error bodies)
 * and response_share.c (done events parsed with their long text shared).
 * Nothing else includes it; the assembler's public face is response.h.
 */
#ifndef AGENTZ_RESPONSE_INT_H
#define AGENTZ_RESPONSE_INT_H

#include <stddef.h>

#include <jansson.h>

#include "common/buf.h"
#include "supervisor/model/response.h"

#define RESPONSE_MAX_ITEMS	4096		/* output_index bound */
#define RESPONSE_MAX_PARTS	1024		/* part index bound */
#define RESPONSE_MAX_TEXT	((size_t)256 << 20) /* streamed text */
#define RESPONSE_MSG_MAX	1024
#define RESPONSE_CODE_MAX	64
#define RESPONSE_NAME_MAX	96
#define RESPONSE_EXCERPT_MAX	200

/* Where a streamed string lands in its item. */
enum response_place {
	PLACE_ITEM,		/* item[field] */
	PLACE_OPERATION,	/* item.operation[field] */
	PLACE_CONTENT,		/* item.content[content_index][field] */
	PLACE_SUMMARY,		/* item.summary[summary_index][field] */
};

/* A streamed string field: field is also the key of the full value in
 * the .done event. part_type names a part created from nothing. */
struct response_text {
	const char *delta;
	const char *done;
	enum response_place place;
	const char *part_type;
	const char *field;
};


/* A streamed string, or a part template, for one place of one item. */
struct response_acc {
	size_t slot;
	enum response_place place;
	size_t index;
	const struct response_text *text;	/* NULL until text arrives */
	json_t *part;		/* from a *_part event, or NULL */
	struct buf buf;
	int have_buf;
};

/* Output item at one output_index, as last received. id is borrowed from
 * item (NULL if its "id" is absent or not a string); items are never
 * modified, so it stays valid as long as item. */
struct response_slot {
	json_t *item;
	const char *id;
	size_t idlen;
	int has_id;		/* item has an "id" key of any type */
	int done;
};

/* An index field as response_index() reads it. */
enum response_num_state {
	NUM_ABSENT,		/* no such key, or null */
	NUM_INT,		/* an integer (of any sign) in v */
	NUM_OTHER,		/* anything else */
};

struct response_num {
	enum response_num_state state;
	long long v;
};

/* What an event addresses: an item by output_index (item_id as fallback)
 * and a part index (content_index or summary_index, by place). Filled
 * from a json_t or by the fast path scanner. item_id is NULL if absent
 * or not a string; it need not be NUL-terminated. */
struct response_ref {
	const char *item_id;
	size_t item_id_len;
	struct response_num output_index;
	struct response_num part_index;
};

/* response_last_event() for an event the fast path took: its data, parsed
 * on demand. Behind a pointer so that the const getter may fill ev. */
struct response_lazy {
	struct buf data;
	int pending;		/* data holds the last event */
	json_t *ev;		/* parsed data, or NULL */
};

struct response {
	enum response_status status;
	int broken;		/* protocol error: refuse input */
	int terminal;		/* a terminal event arrived */
	struct response_slot *slots;
	size_t nslots;
	struct response_acc *accs;
	size_t naccs, acccap;
	json_t *id;		/* string */
	json_t *model;		/* string */
	json_t *snapshot;	/* from created / in_progress */
	json_t *final;		/* from the terminal event */
	json_t *last;		/* last event parsed */
	json_t *result;		/* response_result() cache */
	json_t *shared;		/* response_share.c: a text done events repeat */
	struct response_lazy *lazy;
	struct buf scratch;	/* the fast path's decoded delta */
	int fast_off;		/* response_set_fast(r, 0) */
	size_t nfast;		/* events the fast path took */
	struct response_usage usage;
	int have_usage;
	size_t delta_bytes;
	size_t text_bytes;
	size_t nevents;
	char last_type[RESPONSE_NAME_MAX];
	char code[RESPONSE_CODE_MAX];
	char msg[RESPONSE_MSG_MAX];
};

#define RESPONSE_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* response_msg.c: status and messages. response_set() leaves
 * RESPONSE_IN_PROGRESS once (later calls change nothing); response_protocol()
 * also marks r broken (the caller returns -1). Messages are cleaned for a
 * terminal and truncated on a character boundary. */
void response_format(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void response_set(struct response *r, enum response_status status,
    const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void response_protocol(struct response *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "event <name>", or "event #<n>" when it has no name. */
void response_event_name(const char *event, size_t n, char *buf,
    size_t size);
/* Fail with "<what>[: <code>][: <message>]" from an error object; with
 * use_type its "type" stands in for a missing "code". */
void response_fail_from(struct response *r, const char *what, json_t *err,
    int use_type);
/* Keep id and model of a response object; read its usage object. */
void response_note_meta(struct response *r, json_t *resp);
void response_read_usage(struct response *r, json_t *u);

/* response_item.c: items and accumulators. */
/* The addressing fields of ev for a string streamed to place. */
void response_ref_from(json_t *ev, enum response_place place,
    struct response_ref *ref);
/* The slot output_item.added/.done writes (grown as needed); -1 on a
 * protocol error, recorded in r. */
int response_slot_for(struct response *r, json_t *ev, json_t *item,
    size_t *slotp);
/* Forget the accumulators of slot (its item was replaced). */
void response_acc_drop(struct response *r, size_t slot);
void response_acc_clear(struct response_acc *a);
/* The accumulator for ref at place: 1 in *ap, 0 if the event is to be
 * ignored, -1 on a protocol error (recorded in r). */
int response_acc_for(struct response *r, const struct response_ref *ref,
    enum response_place place, struct response_acc **ap);
/* Append p[0..n) to a's text, within RESPONSE_MAX_TEXT; -1 as above. */
int response_acc_append(struct response *r, struct response_acc *a,
    const char *p, size_t n);

/* response_share.c: json_loadb(data, len, JSON_ALLOW_NUL) for an event
 * that repeats an accumulated text, with that text shared rather than
 * copied (r->shared). NULL when it does not apply (or the fast path is
 * off) or on any failure: the caller then parses data with json_loadb(). */
json_t *response_load_shared(struct response *r, const char *data,
    size_t len);

#endif /* AGENTZ_RESPONSE_INT_H */
