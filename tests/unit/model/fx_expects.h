/*
 * fx_expects.h - the recorded fixtures ($AGENTZ_FIXTURES, default
 * ../shared/fixtures/responses) and what each must come out as (values
 * copied from the files), for test_fixtures.c and test_response_fast_fx.c.
 */
#ifndef AGENTZ_TEST_FX_EXPECTS_H
#define AGENTZ_TEST_FX_EXPECTS_H

/* One line of a recorded block into b; the fixtures use one data line. */
static void
fx_block_line(json_t *b, const char *line)
{
	if (strncmp(line, "event: ", 7) == 0)
		assert_int_equal(json_object_set_new(b, "event",
		    json_string(line + 7)), 0);
	else if (strncmp(line, "data: ", 6) == 0 &&
	    json_object_get(b, "data") == NULL)
		assert_int_equal(json_object_set_new(b, "data",
		    json_string(line + 6)), 0);
	else if (line[0] == ':')
		assert_int_equal(json_object_set_new(b, "comment",
		    json_string(line + 1)), 0);
	else
		fail_msg("unexpected fixture line: %.60s", line);
}

/* The blocks of a recording: {event?, data} or {comment}. */
static json_t *
fx_blocks_sse(const char *raw)
{
	json_t *blocks = json_array(), *b;
	char *copy = strdup(raw), *blk, *end, *line, *next;

	assert_non_null(copy);
	for (blk = copy; *blk != '\0'; blk = end) {
		end = strstr(blk, "\n\n");
		assert_non_null(end);
		*end = '\0';
		end += 2;
		assert_non_null(b = json_object());
		for (line = blk; line != NULL; line = next) {
			if ((next = strchr(line, '\n')) != NULL)
				*next++ = '\0';
			fx_block_line(b, line);
		}
		assert_int_equal(json_array_append_new(blocks, b), 0);
	}
	free(copy);
	return blocks;
}

/* README: each .jsonl line is one data payload, event = its type. */
static json_t *
fx_blocks_jsonl(const char *raw)
{
	json_t *blocks = json_array(), *ev;
	const char *line = raw, *nl;
	size_t n;

	for (; *line != '\0'; line = *nl != '\0' ? nl + 1 : nl) {
		nl = strchr(line, '\n');
		nl = nl != NULL ? nl : line + strlen(line);
		n = (size_t)(nl - line);
		if (n == 0)
			continue;
		assert_non_null(ev = json_loadb(line, n, 0, NULL));
		json_array_append_new(blocks, json_pack("{s:O, s:s%}", "event",
		    json_object_get(ev, "type"), "data", line, n));
		json_decref(ev);
	}
	return blocks;
}

static json_t *
fx_blocks(const char *name, const char *raw)
{
	size_t n = strlen(name);

	if (n > 6 && strcmp(name + n - 6, ".jsonl") == 0)
		return fx_blocks_jsonl(raw);
	return fx_blocks_sse(raw);
}

enum fx_kind {
	FX_STREAM,	/* .sse / .jsonl */
	FX_BODY,	/* non-streamed response object */
	FX_ERROR_BODY,	/* non-2xx body */
	FX_REQUEST,	/* request body: checked against a stream's items */
};

/* What each recording must come out as; values copied from the files. */
struct fx_expect {
	const char *file;
	enum fx_kind kind;
	enum response_status status;
	int has_usage;
	int path_streamed;	/* path_value also from deltas alone */
	int found;
	const char *id;
	const char *model;
	const char *types;	/* output item types */
	const char *fn_name;	/* of the first function_call */
	const char *fn_args;
	const char *call_id;
	const char *text;	/* the message text starts with */
	size_t text_len;	/* bytes of all message text */
	long long usage[5];	/* in, cached, out, reasoning, total */
	size_t delta_bytes;
	const char *error;
	const char *code;
	long http_status;	/* FX_ERROR_BODY */
	const char *path;	/* one more output value... */
	const char *path_value;	/* ...starts with this */
	const char *pair;	/* FX_REQUEST: its stream */
};

static struct fx_expect fx_expects[] = {
	{
		.file = "text_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_01000000000000000000000000000000000000000000000000",
		.model = "gpt-4.1-2025-04-14",
		.types = "message",
		.text = "streamed", .text_len = 8,
		.has_usage = 1, .usage = { 21, 0, 3, 0, 24 },
		.delta_bytes = 8,
		.path = "0/content/0/text", .path_value = "streamed",
		.path_streamed = 1,
	},
	{
		.file = "function_call_stream_legacy_no_seq.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
		.model = "gpt-4o-2024-08-06",
		.types = "function_call",
		.fn_name = "get_capital", .fn_args = "{\"country\":\"France\"}",
		.call_id = "call_kL0PCQV7M2WMoVX8V8OtYSAL",
		.has_usage = 1, .usage = { 255, 0, 16, 0, 271 },
		.delta_bytes = 20,
		.path = "0/status", .path_value = "completed",
	},
	{
		.file = "reasoning_encrypted_function_call_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
		.model = "gpt-5-2025-08-07",
		.types = "reasoning,function_call",
		.fn_name = "final_result", .fn_args = "{\"result\":6666}",
		.call_id = "call_CWXgs68YprAjp6t0371hiPOI",
		.has_usage = 1, .usage = { 53, 0, 469, 448, 522 },
		.delta_bytes = 15,
		.path = "0/id",
		.path_value =
		    "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405",
		.path_streamed = 1,
	},
	{
		.file = "reasoning_summary_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff",
		.model = "o3-mini-2025-01-31",
		.types = "reasoning,message",
		.text = "I'm not a road safety professional, but here are some "
		    "generally accepted guidelines",
		.text_len = 1275,
		.has_usage = 1, .usage = { 13, 0, 1680, 1408, 1693 },
		.delta_bytes = 3317,
		.path = "0/summary/3/text",
		.path_value = "**Providing safe crossing advice**\n\nI’m",
		.path_streamed = 1,
	},
	{
		.file = "agent_turn_reasoning_commentary_function_call.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0fabc13af1ee0049006a691dfdab8881a1a75f2db7ff78cb83",
		.model = "gpt-5.5-2026-04-23",
		.types = "reasoning,message,function_call",
		.fn_name = "get_capital",
		.fn_args = "{\"country\":\"PotatoLand\"}",
		.call_id = "call_LabG58Uhrq9kZvR52BYKjToD",
		.text = "I’ll check the capital lookup tool for “PotatoLand",
		.text_len = 58,
		.has_usage = 1, .usage = { 63, 0, 69, 26, 132 },
		.delta_bytes = 82,
		.path = "1/phase", .path_value = "commentary",
		.path_streamed = 1,
	},
	{
		.file = "request_followup_after_function_call.json",
		.kind = FX_REQUEST,
		.pair = "agent_turn_reasoning_commentary_function_call.sse",
	},
	{
		.file = "completed_response_parallel_function_calls.json",
		.kind = FX_BODY,
		.status = RESPONSE_COMPLETED,
		.id = "resp_67e547c48c9481918c5c4394464ce0c60ae6111e84dd5c08",
		.model = "gpt-4o-2024-08-06",
		.types = "function_call,function_call",
		.fn_name = "get_location",
		.fn_args = "{\"loc_name\":\"Londos\"}",
		.call_id = "call_LWVp74L5HaH2KNvgVz9PJsrj",
		.has_usage = 1, .usage = { 0, 0, 0, 0, 0 },
		.path = "1/arguments",
		.path_value = "{\"loc_name\":\"London\"}",
	},
	{
		.file = "openrouter_reasoning_text_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "gen-1764265411-Fu1iEX7h5MRWiL79lb94",
		.model = "openai/gpt-oss-20b",
		.types = "reasoning,message",
		.text = "4", .text_len = 1,
		.has_usage = 1, .usage = { 78, 0, 37, 22, 115 },
		.delta_bytes = 86,
		.path = "0/content/0/text",
		.path_value = "The user asks: \"What is 2+2?\" They expect a "
		    "straightforward answer: 4. Just answer 4.",
		.path_streamed = 1,
	},
	{
		.file = "deepseek_reasoning_function_call_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "1235b7ba-fdc9-4a1c-bfe4-6137c207baf3",
		.model = "deepseek-v4-flash",
		.types = "reasoning,function_call",
		.fn_name = "get_temperature",
		.fn_args = "{\"city\": \"Tokyo\"}",
		.call_id = "call_00_xjY8Z2BvSlzgEmmw0DtH0464",
		.has_usage = 1, .usage = { 366, 256, 59, 14, 425 },
		.delta_bytes = 78,
		.path = "0/content/0/text",
		.path_value = "The user asks about temperature in Tokyo. "
		    "I'll call the tool.",
		.path_streamed = 1,
	},
	{
		.file = "apply_patch_call_stream.jsonl",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0372d86dfc1762fe00692741f339a08190bce9b78ee2079295",
		.model = "gpt-5.1-2025-11-13",
		.types = "apply_patch_call",
		.has_usage = 1, .usage = { 642, 0, 67, 0, 709 },
		.delta_bytes = 95,
		.path = "0/operation/diff",
		.path_value = "+## Shopping Checklist\n+\n+- [ ] Milk\n"
		    "+- [ ] Bread\n+- [ ] Eggs\n+- [ ] Fresh fruit\n"
		    "+- [ ] Coffee\n",
		.path_streamed = 1,
	},
	{
		.file = "local_shell_call_stream.jsonl",
		.status = RESPONSE_COMPLETED,
		.id = "resp_68da7fd5d24481949fc2cf1cc60377050faf5df54b42d9a6",
		.model = "gpt-5-codex",
		.types = "reasoning,local_shell_call",
		.has_usage = 1, .usage = { 407, 0, 151, 128, 558 },
		.path = "1/action/command/2", .path_value = "~",
	},
	{
		.file = "error_event_then_failed.jsonl",
		.status = RESPONSE_FAILED,
		.id = "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
		.model = "gpt-5-nano-2025-08-07",
		.types = "",
		.error = "stream error: insufficient_quota: You exceeded your "
		    "current quota, please check your plan and billing "
		    "details. For more information on this error, read the "
		    "docs: https://platform.openai.com/docs/guides/error-codes/"
		    "api-errors.",
		.code = "insufficient_quota",
	},
	{
		.file = "error_event_server_error_null_code.jsonl",
		.status = RESPONSE_FAILED,
		.types = "",
		.error = "stream error: server_error: Sorry, something went "
		    "wrong.",
		.code = "server_error",
	},
	{
		.file = "error_insufficient_quota.json",
		.kind = FX_ERROR_BODY,
		.http_status = 429,
		.error = "HTTP 429: insufficient_quota: You exceeded your "
		    "current quota, please check your plan and billing "
		    "details. For more information on this error, read the "
		    "docs: https://platform.openai.com/docs/guides/error-codes/"
		    "api-errors.",
		.code = "insufficient_quota",
	},
	{
		.file = "error_400_no_tool_call_found.json",
		.kind = FX_ERROR_BODY,
		.http_status = 400,
		.error = "HTTP 400: invalid_request_error: No tool call found "
		    "for function call output with call_id "
		    "call_SjdIRQnfceiXp0D5eZCcjlxW.",
		.code = "invalid_request_error",
	},
	{
		.file = "error_400_reasoning_without_following_item.json",
		.kind = FX_ERROR_BODY,
		.http_status = 400,
		.error = "HTTP 400: invalid_request_error: Item "
		    "'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of "
		    "type 'reasoning' was provided without its required "
		    "following item.",
		.code = "invalid_request_error",
	},
};

static const char *
fx_dir(void)
{
	const char *d = getenv("AGENTZ_FIXTURES");

	return d != NULL && *d != '\0' ? d : "../shared/fixtures/responses";
}

static char *
fx_read(const char *name, size_t *lenp)
{
	char path[4096];

	(void)snprintf(path, sizeof(path), "%s/%s", fx_dir(), name);
	return read_file(path, lenp);
}

enum fx_transform {
	T_NONE,
	T_STRIP,	/* the terminal event's output becomes [] */
	T_PARTS,	/* T_STRIP, and output_item.done is dropped */
	T_DELTAS,	/* T_STRIP, and every *.done event is dropped */
};

/* A wire built from blocks; kinds: 0 comment, 1 event, 2 terminal event,
 * 3 error event. */
struct wire {
	char *p;
	size_t len;
	size_t ends[1024];	/* offset after each block */
	int kinds[1024];
	size_t nblocks;
};

static struct fx_expect *
fx_find(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(fx_expects); i++) {
		if (strcmp(fx_expects[i].file, name) == 0)
			return &fx_expects[i];
	}
	return NULL;
}

#endif
