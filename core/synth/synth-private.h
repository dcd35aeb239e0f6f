/* synth-private.h - what the synthetic tasks share: a portable random generator, the task table
 * and the renderer that turns a task's drawing into nuisance-laden images. */
#pragma once

#include <cairo.h>
#include <json-glib/json-glib.h>

#include "synth/synth.h"

/* xoshiro256** seeded through splitmix64: the same stream on every machine (rand() is not). */
typedef struct {
    guint64 s[4];
} ClSynthRng;

guint64 cl_synth_splitmix64(guint64 *state);
void cl_synth_rng_init(ClSynthRng *r, guint64 seed);
guint64 cl_synth_rng_next(ClSynthRng *r);
double cl_synth_rng_double(ClSynthRng *r); /* [0, 1), 53 bits */
double cl_synth_rng_range(ClSynthRng *r, double lo, double hi);
int cl_synth_rng_int(ClSynthRng *r, int lo, int hi); /* lo..hi inclusive */

/* Draws image `image` of a sample in scene pixels: the caller has already translated `cr` by the
 * image's shift. It must cover the whole image plus a few pixels around it. */
typedef void (*ClSynthDrawFunc)(cairo_t *cr, const ClSynthSample *s, int image, gpointer data);

/* What a task's generator hands back besides the sample fields it fills. */
typedef struct {
    ClSynthDrawFunc draw;
    gpointer data;
    GDestroyNotify free_data;
    /* optional: the rotation (radians) and relative scale change a task's own drawing gave image
     * `image` about its centre, recorded in its ClSynthImage */
    void (*framing)(int image, gpointer data, double *rotation, double *rescale);
} ClSynthDrawing;

/* A task fills s->n_images, s->objects (with boxes), s->conversation (answer last),
 * s->changes, s->quantity/value and the drawing. The common code renders, adds the nuisances
 * (from a stream of their own, so switching them off changes no answer) and the aux targets. */
typedef gboolean (*ClSynthGenerateFunc)(ClSynthSample *s, ClSynthRng *rng,
                                        const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                        GError **error);

typedef struct {
    const char *name;
    const char *summary;
    ClSynthGenerateFunc generate;
    /* the data set's image files (dataset.c writes each format): "dcm", "tif"; NULL = "png" */
    const char *ext;
    /* The structured answer (cl_synth_sample_answer_json); NULL = the shapes / dots form. */
    JsonNode *(*answer_json)(const ClSynthSample *s);
    /* One image, no change: the grounded single-image tasks (ground.c); the others take 2-5. */
    gboolean single;
    /* A long sequence: 3 to CL_SYNTH_MAX_SERIES images (the series tasks). */
    gboolean series;
} ClSynthTaskDef;

gboolean cl_synth_shapes_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error);
gboolean cl_synth_dots_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                ClSynthDrawing *drawing, GError **error);
/* The task's image file extension without the dot ("dcm", "tif", "png"); NULL for no task. */
const char *cl_synth_task_ext(const char *task);
/* radiograph.c (+ its DICOM writer: image k of a sample, radiograph-dicom.cc) */
gboolean cl_synth_radiograph_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                      ClSynthDrawing *drawing, GError **error);
gboolean cl_synth_radiograph_write(const ClSynthSample *s, int k, const char *path, GError **error);
/* aerial.c (+ its GeoTIFF writer, aerial-geotiff.c) */
/* The conversation's last (answer) turn replaced by `answer` (the tasks built on another's). */
void cl_synth_replace_answer(ClSynthSample *s, const char *answer);
gboolean cl_synth_radiograph_history_generate(ClSynthSample *s, ClSynthRng *rng,
                                              const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                              GError **error);
gboolean cl_synth_aerial_log_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                      ClSynthDrawing *drawing, GError **error);
gboolean cl_synth_aerial_series_generate(ClSynthSample *s, ClSynthRng *rng,
                                         const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                         GError **error);
gboolean cl_synth_aerial_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error);
gboolean cl_synth_aerial_write(const ClSynthSample *s, int k, const char *path, GError **error);
JsonNode *cl_synth_aerial_answer_json(const ClSynthSample *s);
/* aerial.c: where the tile lies (UTM zone 33N) and its ground sample distance */
void cl_synth_aerial_georef(const ClSynthSample *s, double origin[2], double *gsd);
/* edits.c */
gboolean cl_synth_edits_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                 ClSynthDrawing *drawing, GError **error);
JsonNode *cl_synth_edits_answer_json(const ClSynthSample *s);

/* "an" before a word that starts with a vowel, else "a" */
const char *cl_synth_a_or_an(const char *word);

/* photo-edits.c */
gboolean cl_synth_photo_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                       const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                       GError **error);
JsonNode *cl_synth_photo_edits_answer_json(const ClSynthSample *s);
/* the same edits in the radiograph and aerial tasks' renders (photo-edits.c) */
gboolean cl_synth_radiograph_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                            const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                            GError **error);
gboolean cl_synth_aerial_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                        const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                        GError **error);

/* The change tasks' scenes for one image, for the grounded tasks (ground.c): each gives what the
 * first image of its change task would show, drawn the same way, without touching the sample's
 * other fields. */
/* shapes.c: the objects of a first scene; the drawing of s->objects[image] */
GArray *cl_synth_shapes_scene(ClSynthRng *rng, const ClSynthOptions *opts, double scale);
void cl_synth_shapes_drawing(ClSynthDrawing *drawing, double scale);
/* dots.c: one dot inside the frame; the screen-like background from its seed, then the dot */
ClSynthObject cl_synth_dots_place(ClSynthRng *rng, int w, int h, double radius);
void cl_synth_dots_drawing(ClSynthDrawing *drawing, guint64 background_seed, double scale,
                           double radius);
/* radiograph.c: one film (a patient with a reference film's 0-3 findings and an acquisition):
 * sets s->n_images = 1, s->objects and the drawing */
void cl_synth_radiograph_film(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                              ClSynthDrawing *drawing);
/* aerial.c: one tile (a before image): sets s->n_images = 1, s->objects and the drawing */
void cl_synth_aerial_tile(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                          ClSynthDrawing *drawing);
/* edits.c: one scene (object 0 the backdrop): sets s->n_images = 1, s->objects and the drawing;
 * returns the setting (0 table-top, 1 room, 2 garden) */
int cl_synth_edits_scene(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                         ClSynthDrawing *drawing);
const char *cl_synth_edits_object_name(const ClSynthObject *o);          /* "cup" */
const char *cl_synth_edits_backdrop_name(const ClSynthObject *backdrop); /* "a red brick wall" */
/* ground.c: the grounded tasks */
gboolean cl_synth_ground_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error);
JsonNode *cl_synth_ground_answer_json(const ClSynthSample *s);

/* The image-area scale of the tasks' drawings: 1 at 160 px. */
static inline double cl_synth_scale(const ClSynthSample *s, const ClSynthOptions *opts)
{
    (void)s;
    return MIN(opts->width, opts->height) / 160.0;
}

/* The red dot's radius in pixels: 3.5 at 160 px, times the options' dot scale. */
static inline double cl_synth_dot_radius(const ClSynthSample *s, const ClSynthOptions *opts)
{
    return 3.5 * cl_synth_scale(s, opts) * opts->dot_scale;
}
