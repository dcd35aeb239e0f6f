/* metrics-private.h - what metrics.c, meteor.c and tokenize.c share: sentences as word ids. */
#pragma once

#include "train/metrics.h"

typedef struct {
    guint32 *ids; /* interned word ids, one per token */
    char **words; /* the tokens themselves (NULL-terminated) */
    guint len;
} ClMetricsSent;

void cl_metrics_sent_from_text(ClMetricsSent *out, const char *text, ClMetricsFlags flags,
                               GHashTable *vocab);
void cl_metrics_sent_clear(ClMetricsSent *s);

/* Corpus METEOR; per-candidate scores into sentence[n]. */
double cl_metrics_meteor_corpus(ClMetricsSent *cand, ClMetricsSent **refs, const guint *n_refs,
                                guint n, double *sentence);
