/* grounding.h - the description held to where the change head found the change: the 3 × 3
 * cells of the changed regions (from the per-patch change probabilities), and the check that
 * keeps a generated position phrase ("at the top left") to the allowed cells (docs/MODEL.md
 * §3.13). */
#pragma once

#include <glib.h>

#include "model/config.h"
#include "model/preprocess.h"

G_BEGIN_DECLS

/* The coarse positions the position-saying tasks (photo-edits, aerial) use, row-major over
 * the image's 3 × 3 grid: "top left", "top", "top right", "left", "centre", ..., NULL-ended. */
extern const char *const cl_grounding_position_names[10];
/* The same positions with the prepositions the aerial task's sentences take (LEVIR-CC's): "at
 * the top left", "at the top", …, "on the left", "in the centre", …, NULL-ended. */
extern const char *const cl_grounding_place_names[10];
/* The aerial task's clauses open with their object: "a building", "the building", "a house", "a
 * new house", "a road", "a new road", "the trees", "some trees" (LEVIR-CC's, core/synth/aerial.c),
 * NULL-ended; cl_grounding_aerial_noun_kinds[i] is the kind (the aerial object head's class name,
 * cl_synth_aerial_kind_name) that phrase i names. */
extern const char *const cl_grounding_aerial_nouns[9];
extern const char *const cl_grounding_aerial_noun_kinds[8];

#define CL_GROUNDING_MAX_REGIONS 2

typedef struct {
    int n;                                 /* regions found: 0 (no patch at 0.5) to 2 */
    int cell[CL_GROUNDING_MAX_REGIONS];    /* their 3 × 3 cells of the image, largest first */
    double mass[CL_GROUNDING_MAX_REGIONS]; /* their summed probabilities */
    double x[CL_GROUNDING_MAX_REGIONS], y[CL_GROUNDING_MAX_REGIONS]; /* centres, in [0, 1] of
                                                                      * the image */
} ClChangeRegions;

/* The changed regions of an image: the 8-connected groups of patches whose change probability
 * (prob, grid × grid patches over the model input) is at least 0.5, each placed at its
 * probability-weighted centre, in the image's own frame (the letterbox's padding left out).
 * The largest group comes first; a second one is kept when its mass is at least a third of
 * the first's (a moved object leaves two). */
void cl_grounding_change_regions(const float *prob, int grid, const ClLetterbox *lb,
                                 ClChangeRegions *out);

/* Where a slot's phrases are looked for: right after "at the", "from the", "to the", "on the" or
 * "in the" (positions), or after "The", "A" or "An" opening a sentence (objects). */
typedef enum {
    CL_GROUNDING_AFTER_PREPOSITION,
    CL_GROUNDING_SENTENCE_START,
    /* the phrases hold their prepositions (cl_grounding_place_names): a run of their words that
     * starts with "at", "in" or "on", anywhere */
    CL_GROUNDING_PLACE,
    /* the phrases hold their determiners (cl_grounding_aerial_nouns): a run of their words that
     * opens a clause — the answer's start, or after "and" or a punctuation mark ("at the top" is
     * none: its "the" follows a preposition) */
    CL_GROUNDING_CLAUSE_START,
    /* the radiograph answers' lists of findings (the phrases: the model's radiograph findings,
     * cl_config_findings): after "additional finding(s) of " each listed name must be one of
     * `allowed`, after "missing the finding(s) of " one of `allowed_missing`, none twice, and a
     * list goes on (", ", " and ", ", and ") only while an allowed name is left to add */
    CL_GROUNDING_FINDINGS,
} ClGroundingContext;

/* A set of phrases, the ones allowed, and where they are said. phrases: NULL-ended, words of
 * lower-case letters joined by single spaces; allowed: one flag per phrase. */
typedef struct {
    const char *const *phrases;
    const gboolean *allowed;
    ClGroundingContext context;
    /* AFTER_PREPOSITION: the phrases allowed after "from the" (where a moved object was);
     * NULL: `allowed` there too */
    const gboolean *allowed_from;
    /* FINDINGS: the names allowed in the missing findings' list (`allowed`: the additional
     * ones'); NULL or none allowed: that list is not held */
    const gboolean *allowed_missing;
    /* FINDINGS: the names a list opened in the plural ("findings of") may hold, additional and
     * missing (cl_grounding_findings_several); NULL: `allowed`, `allowed_missing`. The plural is
     * refused where fewer than two are allowed: such a list could not be closed. */
    const gboolean *allowed_several, *allowed_missing_several;
} ClGroundingSlot;

/* Whether text[0, len) keeps its last phrase of the slot to the allowed ones. A phrase is a run
 * of the phrases' words joined by single spaces in the slot's context; while it is being written
 * (the text ends inside it, or in a word that may still grow into one of its words) it must be
 * the start of an allowed phrase, and once another word or a punctuation mark follows, an
 * allowed phrase whole; a word after a whole allowed phrase may not be one that would make
 * another phrase of it ("at the top" + "le" when only "top" is allowed). Text elsewhere is not
 * looked at ("The top hat" is no position, "at the top" no object). Only the last 64 bytes are
 * read; `whole` says that text[0] is the answer's first byte (a sentence starts there). */
gboolean cl_grounding_text_ok(const char *text, gsize len, gboolean whole,
                              const ClGroundingSlot *slot);

/* FINDINGS reads the whole text it is given (the lists outgrow 64 bytes): generation passes this
 * much of the answer's end */
#define CL_GROUNDING_TEXT_WINDOW 256

/* The radiograph findings whose presence the object head sees change (docs/MODEL.md §3.13): with
 * shows_t(c, p) = σ(objectness) · Π σ(c's label logits) in the radiograph coding (cube, colour
 * c % 8, size c / 8 % 2, material c / 16) of image t at patch p, over the after image's patches
 * whose change probability is at least 0.5, appeared(c) = Σ_p prob_p · max(0, shows_after −
 * shows_before) and vanished(c) the same of shows_before − shows_after. A finding is seen added
 * (added[c]) when appeared(c) is at least CL_GROUNDING_FINDING_SHARE of the largest appeared
 * score and at least CL_GROUNDING_FINDING_MIN; missing likewise. logits: (N,
 * CL_CONFIG_OBJECT_OUT) of each image, prob: (N). appeared, vanished (n_classes, may be NULL):
 * the scores. Returns how many findings were seen changed (0 without both images or no patch
 * at 0.5). The share was chosen on seed 7100 (`eval --task radiograph --grounded`), not the
 * evaluation seed. */
#define CL_GROUNDING_FINDING_SHARE 0.7
#define CL_GROUNDING_FINDING_MIN 0.5
int cl_grounding_findings(const float *before, const float *after, const float *prob, int N,
                          int n_classes, gboolean *added, gboolean *missing, double *appeared,
                          double *vanished);

/* The findings a list of several may name: those of `seen` (cl_grounding_findings' added or
 * missing) and the next best by `score` (its appeared or vanished) when that is at least
 * CL_GROUNDING_FINDING_MIN — where the decoder writes "findings of", it has seen more than one
 * change, and the head's second best is nearly always one (docs/MODEL.md §3.13). n classes. */
void cl_grounding_findings_several(const gboolean *seen, const double *score, int n,
                                   gboolean *several);

/* config.n_objects: the class the object head sees where the change is. logits: the head's
 * (N, CL_CONFIG_OBJECT_OUT) for the image before and the image after (either may be NULL);
 * prob: the after image's change probabilities. Class c scores the sum over the patches at 0.5
 * or above, and over both images, of prob · σ(objectness) · Σ log σ(c's label logits) (see
 * config.h for c's labels), over the sum of the weights; the best class, or -1 when no patch
 * is at 0.5. *share: the best class's share of exp(score) over the classes (may be NULL). */
int cl_grounding_changed_object(const float *before, const float *after, const float *prob, int N,
                                int n_classes, double *share);

/* The class whose presence changed in each changed region (the regions of
 * cl_grounding_change_regions on the same prob, grid × grid patches, in its order): with
 * shows_t(c, p) = σ(objectness) · Π σ(c's label logits) of image t at patch p — class c's labels
 * in the head's coding `task` (config.object_task; aerial: the colour label c) — class c scores
 * Σ_p prob_p · |shows_after(c, p) − shows_before(c, p)| over the region's patches (a patch the
 * change left alone, a neighbour's trees seen in both images, counts not; a missing image shows
 * nothing). Only classes with candidates[c] (NULL: all) are chosen. classes[i] (and shares[i],
 * its share of the candidates' scores; may be NULL) for each region i, -1 beyond; returns how
 * many regions (0 when none, or no candidate class). */
int cl_grounding_region_objects(const float *before, const float *after, const float *prob,
                                int grid, ClObjectTask task, int n_classes,
                                const gboolean *candidates, int classes[CL_GROUNDING_MAX_REGIONS],
                                double shares[CL_GROUNDING_MAX_REGIONS]);

G_END_DECLS
