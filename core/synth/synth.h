/* synth.h - synthetic change tasks (docs/DESIGN.md §5): Cairo-rendered image sequences with the SVE
 * paper's conversations (appendix B), structured answers and per-patch auxiliary targets, all
 * deterministic from (task, seed). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "model/chat.h"

G_BEGIN_DECLS

#define CL_SYNTH_ERROR (cl_synth_error_quark())
GQuark cl_synth_error_quark(void);

typedef enum {
    CL_SYNTH_ERROR_UNKNOWN_TASK, /* the message lists the known tasks */
    CL_SYNTH_ERROR_OPTIONS,      /* an option out of range */
    CL_SYNTH_ERROR_IO,           /* writing a data set failed */
    CL_SYNTH_ERROR_EXISTS,       /* the output folder is not empty (and force was not given) */
} ClSynthError;

/* Generation options; cl_synth_options_init fills the defaults. */
typedef struct {
    int width, height; /* image size in pixels (default 160 × 160; 32..4096) */
    int patch;         /* auxiliary-target patch size (default 16); grid = ceil(size / patch) */
    gboolean nuisance; /* misregistration, gain/offset and sensor noise per image (default on) */
    int n_images;      /* dots: 2..5, 0 = drawn from the seed; shapes: always 2 */
    int min_objects;   /* shapes: objects in the first scene, 0 = from the image size */
    int max_objects;   /*   (at most 64; the paper's 768 px scenes hold 30-40) */
    int min_changes;   /* shapes: simultaneous changes, default 1..4 (the paper: 4) */
    int max_changes;
    /* how strong the acquisition nuisances are when `nuisance` is on: 1 mild (default), 2 strong
     * (shifts of 2-4 px, larger gain and offset changes, more noise; photo-edits: a strong
     * white-balance change and JPEG on every image), 0 none */
    int nuisance_level;
    /* photo-edits: the photographs, "train" (default; NULL too) or "heldout" */
    const char *photos;
    /* radiograph, aerial: every pair shows a change (a training mix that wants more changed
     * pairs: the tasks draw a share of unchanged ones, about 1 in 7 and 1 in 2) */
    gboolean changed_only;
    double dot_scale; /* dots tasks: the red dot's radius as a multiple of the default
                          * (3.5 px at 160 px; default 1, 1..4): larger dots for a curriculum */
} ClSynthOptions;

void cl_synth_options_init(ClSynthOptions *opts);

/* The tasks that can be generated, NULL-terminated ("shapes", "dots"). */
const char *const *cl_synth_tasks(void);
/* One line about a task, NULL for an unknown one. */
const char *cl_synth_task_summary(const char *task);

typedef enum {
    CL_SYNTH_SHAPE_CUBE,
    CL_SYNTH_SHAPE_SPHERE,
    CL_SYNTH_SHAPE_CYLINDER,
    CL_SYNTH_SHAPE_DOT, /* the dots task's red dot */
    CL_SYNTH_N_SHAPES
} ClSynthShape;

#define CL_SYNTH_N_COLOURS 8    /* CLEVR's: gray red blue green brown purple cyan yellow */
#define CL_SYNTH_N_SIZES 2      /* small large */
#define CL_SYNTH_N_MATERIALS 2  /* rubber (matte) metal (specular) */
#define CL_SYNTH_MAX_OBJECTS 64 /* grounding bitmasks are guint64 */
#define CL_SYNTH_MAX_SERIES 32  /* images of a series task (aerial-series) */

const char *cl_synth_shape_name(ClSynthShape s);  /* "cube", "sphere", "cylinder", "dot" */
const char *cl_synth_colour_name(int colour);     /* "gray", "red", … */
const char *cl_synth_size_name(int size);         /* "small", "large" */
const char *cl_synth_material_name(int material); /* "rubber", "metal" */

/* One object of one image. Scene coordinates are the pixels of an ideal, registered image;
 * an image's nuisance shift moves what is drawn, not the scene. */
typedef struct {
    ClSynthShape shape;
    int colour, size, material; /* indices into the name tables (dots: 0) */
    double x, y;                /* ground-contact centre (dots: centre), scene pixels */
    double box[4];              /* x0, y0, x1, y1: everything drawn for it (shadow, highlight,
                                 * antialiasing), scene pixels */
} ClSynthObject;

typedef enum {
    CL_SYNTH_CHANGE_MOVE,
    CL_SYNTH_CHANGE_ADD,
    CL_SYNTH_CHANGE_REMOVE,
    CL_SYNTH_CHANGE_REPLACE,
} ClSynthChangeType;

const char *cl_synth_change_name(ClSynthChangeType t); /* "move", "add", "remove", "replace" */

/* A change between image `image - 1` and `image`: indices into those images' object lists
 * (-1 where there is none: `before` for add, `after` for remove). */
typedef struct {
    ClSynthChangeType type;
    int image;
    int before, after;
} ClSynthChange;

/* Ways of saying one change, CLEVR-Change style (appendix B.2's example uses add variant 0 and
 * replace variants 0 and 1): the answer phrases every change with one of them, drawn from the
 * seed. A scorer (appendix C.3) may accept any variant as the same change. */
int cl_synth_change_n_variants(ClSynthChangeType t);
/* "A new large yellow metal cylinder is visible." — capitalised, with its full stop. */
char *cl_synth_change_phrase(ClSynthChangeType t, const ClSynthObject *before,
                             const ClSynthObject *after, int variant);
/* "large yellow metal cylinder" */
char *cl_synth_object_description(const ClSynthObject *o);

typedef enum {
    CL_SYNTH_QUANTITY_NONE,
    CL_SYNTH_QUANTITY_DISTANCE, /* dots, 2 images: distance / image diagonal */
    CL_SYNTH_QUANTITY_AREA,     /* dots, 3-5 images: convex-hull area / image area */
} ClSynthQuantity;

const char *cl_synth_quantity_name(ClSynthQuantity q); /* "none", "distance", "area" */

/* One rendered image: 8-bit samples, rows of width * channels bytes. */
typedef struct {
    int width, height, channels; /* channels: 3 (RGB) or 1 (grey) */
    guint8 *pixels;
    /* the acquisition nuisances applied to it (all zero / gain 1 when off) */
    double shift[2];                  /* drawn content moved by (dx, dy) pixels */
    double gain, offset, noise_sigma; /* v' = v*gain + offset + noise, in 0..255 units */
    double rotation, rescale;         /* turned (radians) and scaled by 1 + rescale about the centre
                               * (photo-edits' framing; 0 when none) */
} ClSynthImage;

typedef struct {
    char *task;
    guint64 seed;
    int n_images;
    ClSynthImage *images; /* n_images */
    GArray **objects;     /* n_images arrays of ClSynthObject (what each image shows) */

    /* The paper's conversation: system prompt (if the task has one), one user turn per image
     * starting "<image>\n", filler answers, the question, and the answer as the last turn. */
    ClChatConversation *conversation;
    const char *answer; /* the last turn's text: the supervised target */
    /* text read with the images (aerial-log: the acquisition log), NULL when none; the prompt
     * holds it as cl_chat_with_context's slot (docs/MODEL.md §4.6) */
    char *context;

    /* Structured answer */
    GArray *changes;          /* ClSynthChange between consecutive images: shapes, in the order
                                  * the answer says them; dots, the dot moving (not in the JSON) */
    ClSynthQuantity quantity; /* dots */
    double value;             /* dots: the quantity before rounding */
    int source;               /* photo-edits: the photograph's index in its set; -1 elsewhere */

    /* Auxiliary per-patch targets for a grid_w × grid_h grid of patch × patch pixels over each
     * image (in that image's pixels, nuisance shift included). */
    int patch, grid_w, grid_h;
    guint64 *grounding; /* (n_images, grid_h, grid_w): bit k = object k of that image
                                  * overlaps the patch */
    guint8 *changed;    /* (n_images, grid_h, grid_w): 1 = the patch shows a change
                                  * against the previous image (image 0: all 0) */
} ClSynthSample;

/* photo-edits: the pasted objects' names ("red apple", …), index 0 .. n − 1; NULL outside. */
const char *cl_synth_photo_object_name(int index);
int cl_synth_photo_n_objects(void);
/* aerial: the kinds of its features ("building", "road", "trees", "water"), index 0 .. n − 1,
 * NULL outside; a feature's kind travels in ClSynthObject.colour, and so in the trainer's objects
 * labels as the colour label (docs/MODEL.md §3.13). */
const char *cl_synth_aerial_kind_name(int index);
int cl_synth_aerial_n_kinds(void);

/* Generates one sample of a task; the same (task, seed, options) gives the same bytes. */
ClSynthSample *cl_synth_generate(const char *task, guint64 seed, const ClSynthOptions *opts,
                                 GError **error);
void cl_synth_sample_free(ClSynthSample *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClSynthSample, cl_synth_sample_free)

/* The seed of sample `index` of a data set generated with `seed` (splitmix64 of both): train and
 * held-out sets come from different data-set seeds. */
guint64 cl_synth_stream_seed(guint64 seed, guint64 index);

/* The structured answer as JSON: shapes {"changes": [{"type", "before": {obj}, "after": {obj}}…]}
 * with objects {"shape","colour","size","material","x","y"} (x, y in [0,1] of the image);
 * dots {"quantity", "value", "text", "points": [[x, y]…]}. */
JsonNode *cl_synth_sample_answer_json(const ClSynthSample *s);

/* One JSONL line (no newline): {"id", "messages", "images", "answer", "task"}. */
char *cl_synth_sample_to_jsonl(const ClSynthSample *s, const char *id,
                               const char *const *image_paths);

/* Writes an image as an 8-bit PNG. */
gboolean cl_synth_image_write_png(const ClSynthImage *img, const char *path, GError **error);

/* Called after each sample written (done of total). */
typedef void (*ClSynthProgress)(int done, int total, gpointer user_data);

/* Writes DIR/images/NNNNNN-K.png and DIR/data.jsonl (through DIR/data.jsonl.tmp and a rename)
 * for samples 0..n-1, sample i from cl_synth_stream_seed(seed, i). A DIR holding anything is
 * refused (CL_SYNTH_ERROR_EXISTS) unless force. */
gboolean cl_synth_write_dataset(const char *dir, const char *task, guint64 seed, int n,
                                const ClSynthOptions *opts, gboolean force,
                                ClSynthProgress progress, gpointer user_data, GError **error);

G_END_DECLS
