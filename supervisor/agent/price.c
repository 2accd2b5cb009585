/*
 * price.c - the price table and cost arithmetic (see price.h).
 *
 * The table holds only models whose three list prices (USD per 1M tokens,
 * standard tier, as on developers.openai.com/api/docs/pricing) were found
 * in public sources read 2026-12, with no source contradicting them: gpt-4o and gpt-4o-mini in the
 * openai-models crate and chatgptpricing-akr.pages.dev/api-pricing;
 * gpt-5.2 in nicolalazzari.ai/articles/openai-api-pricing-explained-2026;
 * gpt-5.4, gpt-5.4-mini and gpt-5.5 in the adk-model crate's
 * openai/pricing.rs and docs.apiyi.com/models (gpt-5.5's output price
 * also in aipromptshub.co/calc/openai-api-cost). Models whose sources
 * disagreed (gpt-5's cached price, gpt-4.1) are left out. The default
 * model, gpt-6-astra, has no price from OpenAI itself and is deliberately
 * absent: --max-cost with it needs --price. Prices change: --price
 * overrides the table for the run's model. A wrong entry makes --max-cost
 * stop early or late, so a model is listed only when its prices are known.
 */
#include "supervisor/agent/price.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRICE_MAX	1e6	/* USD per 1M tokens: anything above is a typo */

static const struct {
	const char *model;
	struct price price;
} table[] = {
	{ "gpt-4o",		{ 2.50, 1.25, 10.00 } },
	{ "gpt-4o-mini",	{ 0.15, 0.075, 0.60 } },
	{ "gpt-5.2",		{ 1.75, 0.175, 14.00 } },
	{ "gpt-5.4",		{ 2.50, 0.25, 15.00 } },
	{ "gpt-5.4-mini",	{ 0.75, 0.075, 4.50 } },
	{ "gpt-5.5",		{ 5.00, 0.50, 30.00 } },
};

/* One number of the list, then sep; the position after sep, or NULL. */
static const char *
one_price(const char *s, int sep, double *out)
{
	char *end;

	if (!isdigit((unsigned char)*s) && *s != '.')
		return NULL;	/* no sign, no space, no inf/nan words */
	errno = 0;
	*out = strtod(s, &end);
	if (errno != 0 || end == s || *end != sep || !isfinite(*out) ||
	    *out < 0 || *out > PRICE_MAX)
		return NULL;
	return sep != '\0' ? end + 1 : end;
}

int
price_parse(const char *s, struct price *p)
{
	struct price v;

	if ((s = one_price(s, ',', &v.input)) == NULL ||
	    (s = one_price(s, ',', &v.cached)) == NULL ||
	    one_price(s, '\0', &v.output) == NULL)
		return -1;
	*p = v;
	return 0;
}

/* "-YYYY-MM-DD" and nothing else. */
static int
is_date_suffix(const char *s)
{
	static const char shape[] = "-dddd-dd-dd";
	size_t i;

	for (i = 0; shape[i] != '\0'; i++)
		if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) :
		    s[i] != '-')
			return 0;
	return s[i] == '\0';
}

int
price_lookup(const char *model, struct price *p)
{
	size_t i, n;

	for (i = 0; i < sizeof table / sizeof table[0]; i++) {
		n = strlen(table[i].model);
		if (strncmp(model, table[i].model, n) == 0 &&
		    (model[n] == '\0' || is_date_suffix(model + n))) {
			*p = table[i].price;
			return 0;
		}
	}
	return -1;
}

double
price_cost(const struct price *p, long long input, long long cached,
    long long output)
{
	input = input > 0 ? input : 0;
	cached = cached > 0 ? (cached < input ? cached : input) : 0;
	output = output > 0 ? output : 0;
	return ((double)(input - cached) * p->input + (double)cached *
	    p->cached + (double)output * p->output) / 1e6;
}

char *
price_format(double usd, char *buf, size_t n)
{
	(void)snprintf(buf, n, usd < 1.0 ? "$%.4f" : "$%.2f", usd);
	return buf;
}
