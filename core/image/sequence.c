/* sequence.c - several files, or one multi-frame/multi-page file, as one ordered sequence. */
#include "image/sequence.h"

#include <math.h>

#include <string.h>

static void item_free(gpointer p)
{
    ClSequenceItem *it = p;
    g_free(it->label);
    g_free(it);
}

void cl_sequence_free(ClSequence *seq)
{
    if (!seq)
        return;
    g_ptr_array_unref(seq->items);
    g_ptr_array_unref(seq->images);
    g_ptr_array_unref(seq->warnings);
    g_free(seq);
}

static const char *order_time(const ClImage *img)
{
    if (img->acquisition_datetime && *img->acquisition_datetime)
        return img->acquisition_datetime;
    if (img->study_datetime && *img->study_datetime)
        return img->study_datetime;
    return NULL;
}

/* Date-times are DICOM "YYYYMMDDHHMMSS.ffffff" prefixes: they order as strings. */
static int cmp_dicom(gconstpointer a, gconstpointer b, gpointer user)
{
    const ClImage *const *images = user;
    const ClImage *x = images[*(const guint *)a], *y = images[*(const guint *)b];
    const char *tx = order_time(x), *ty = order_time(y);
    if (tx && ty) {
        int c = strcmp(tx, ty);
        if (c)
            return c;
    } else if (tx || ty) {
        return tx ? -1 : 1;
    }
    if (x->instance_number != y->instance_number) {
        if (x->instance_number < 0 || y->instance_number < 0)
            return x->instance_number < 0 ? 1 : -1;
        return x->instance_number < y->instance_number ? -1 : 1;
    }
    return 0;
}

static char *patient_key(const ClImage *img)
{
    if (img->format != CL_IMAGE_FORMAT_DICOM)
        return NULL;
    if (img->patient_id && *img->patient_id)
        return g_strdup_printf("ID %s", img->patient_id);
    if (img->patient_name && *img->patient_name)
        return g_strdup_printf("name %s", img->patient_name);
    return NULL;
}

GPtrArray *cl_sequence_warnings(const ClImage *const *images, guint n)
{
    GPtrArray *warnings = g_ptr_array_new_with_free_func(g_free);
    /* patients */
    g_autofree char *first_patient = NULL;
    const char *first_patient_file = NULL;
    for (guint i = 0; i < n; i++) {
        const ClImage *img = images[i];
        g_autofree char *key = patient_key(img);
        if (!key)
            continue;
        if (!first_patient) {
            first_patient = g_steal_pointer(&key);
            first_patient_file = img->path;
        } else if (strcmp(first_patient, key) != 0) {
            g_ptr_array_add(
                warnings, g_strdup_printf("the sequence mixes patients: %s is patient %s, %s is "
                                          "patient %s",
                                          first_patient_file ? first_patient_file : "image 1",
                                          first_patient, img->path ? img->path : "an image", key));
            break;
        }
    }
    /* sizes */
    const ClImage *first = n ? images[0] : NULL;
    for (guint i = 1; first && i < n; i++) {
        const ClImage *img = images[i];
        if (img->width != first->width || img->height != first->height) {
            g_ptr_array_add(warnings,
                            g_strdup_printf("the sequence mixes image sizes: %s is %u × %u, %s is "
                                            "%u × %u",
                                            first->path ? first->path : "image 1", first->width,
                                            first->height, img->path ? img->path : "an image",
                                            img->width, img->height));
            break;
        }
    }
    /* modalities */
    for (guint i = 1; first && i < n; i++) {
        const ClImage *img = images[i];
        if (first->modality && img->modality && strcmp(first->modality, img->modality) != 0) {
            g_ptr_array_add(warnings, g_strdup_printf("the sequence mixes modalities: %s and %s",
                                                      first->modality, img->modality));
            break;
        }
    }
    return warnings;
}

void cl_sequence_order(const ClImage *const *images, guint n, guint *order)
{
    /* Sort the DICOM images among the places DICOM images were given in. */
    g_autofree guint *dicoms = g_new(guint, n ? n : 1);
    guint nd = 0;
    for (guint i = 0; i < n; i++)
        if (images[i]->format == CL_IMAGE_FORMAT_DICOM)
            dicoms[nd++] = i;
    /* g_qsort_with_data is a stable sort */
    g_qsort_with_data(dicoms, (gint)nd, sizeof(guint), cmp_dicom, (gpointer)images);
    guint next = 0;
    for (guint i = 0; i < n; i++)
        order[i] = images[i]->format == CL_IMAGE_FORMAT_DICOM ? dicoms[next++] : i;
}

ClSequence *cl_sequence_new_from_images(ClImage **images, guint n_images)
{
    ClSequence *seq = g_new0(ClSequence, 1);
    seq->images = g_ptr_array_new_with_free_func((GDestroyNotify)cl_image_free);
    seq->items = g_ptr_array_new_with_free_func(item_free);
    seq->warnings = g_ptr_array_new_with_free_func(g_free);

    g_autofree guint *order = g_new(guint, n_images ? n_images : 1);
    cl_sequence_order((const ClImage *const *)images, n_images, order);
    for (guint i = 0; i < n_images; i++)
        g_ptr_array_add(seq->images, images[order[i]]);

    for (guint i = 0; i < seq->images->len; i++) {
        ClImage *img = g_ptr_array_index(seq->images, i);
        guint nf = cl_image_n_frames(img);
        g_autofree char *base =
            img->path ? g_path_get_basename(img->path) : g_strdup_printf("image %u", i + 1);
        for (guint f = 0; f < nf; f++) {
            ClSequenceItem *it = g_new0(ClSequenceItem, 1);
            it->image = img;
            it->frame = f;
            it->label =
                nf > 1 ? g_strdup_printf("%s [frame %u/%u]", base, f + 1, nf) : g_strdup(base);
            g_ptr_array_add(seq->items, it);
        }
    }
    g_ptr_array_unref(seq->warnings);
    seq->warnings =
        cl_sequence_warnings((const ClImage *const *)seq->images->pdata, seq->images->len);
    return seq;
}

ClSequence *cl_sequence_open(const char *const *paths, guint n_paths, const ClImageLimits *limits,
                             GError **error)
{
    g_return_val_if_fail(paths != NULL || n_paths == 0, NULL);
    if (n_paths == 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID, "no files to open");
        return NULL;
    }
    ClImage **images = g_new0(ClImage *, n_paths);
    for (guint i = 0; i < n_paths; i++) {
        images[i] = cl_image_load(paths[i], limits, error);
        if (!images[i]) {
            for (guint j = 0; j < i; j++)
                cl_image_free(images[j]);
            g_free(images);
            return NULL;
        }
    }
    ClSequence *seq = cl_sequence_new_from_images(images, n_paths);
    g_free(images);
    return seq;
}

/* ---- grouping the files of one import (docs/DESIGN.md §9 (table stake 6)) ---- */

/* A photo's stem: the name without its extension and without trailing version words
 * ("scan-before.png", "scan_after.png", "scan (2).png", "scan-v3.png" are all "scan"). */
static char *photo_stem(const char *path)
{
    g_autofree char *base = g_path_get_basename(path ? path : "");
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
        *dot = '\0';
    char *s = g_ascii_strdown(base, -1);
    static const char *const words[] = {
        "before", "after", "original", "orig",    "edited", "edit",
        "new",    "old",   "prior",    "current", "final",  "copy"
    };
    for (gboolean again = TRUE; again;) {
        again = FALSE;
        g_strchomp(s);
        gsize len = strlen(s);
        /* "(2)" */
        if (len > 2 && s[len - 1] == ')') {
            char *open = strrchr(s, '(');
            if (open && open > s) {
                *open = '\0';
                again = TRUE;
                continue;
            }
        }
        char *sep = NULL;
        for (char *p = s + len; p > s; p--)
            if (p[-1] == '-' || p[-1] == '_' || p[-1] == ' ' || p[-1] == '.') {
                sep = p - 1;
                break;
            }
        if (!sep || sep == s)
            break;
        const char *tail = sep + 1;
        gboolean word = FALSE;
        for (guint i = 0; i < G_N_ELEMENTS(words) && !word; i++)
            word = g_str_equal(tail, words[i]);
        /* "v2", "2", "t1" */
        gboolean numbered =
            *tail && (g_ascii_isdigit(tail[0]) ||
                      ((tail[0] == 'v' || tail[0] == 't') && g_ascii_isdigit(tail[1])));
        for (const char *q = tail + (g_ascii_isdigit(tail[0]) ? 0 : 1); numbered && *q; q++)
            numbered = g_ascii_isdigit(*q);
        if (word || numbered) {
            *sep = '\0';
            again = TRUE;
        }
    }
    return s;
}

/* The key an image is grouped by; NULL: a group of its own. */
static char *group_key(const ClImage *img)
{
    if (img->format == CL_IMAGE_FORMAT_DICOM) {
        g_autofree char *patient = patient_key(img);
        const char *part = cl_image_get_meta(img, "BodyPartExamined");
        return g_strdup_printf("dicom|%s|%s|%s", patient ? patient : "?",
                               img->modality ? img->modality : "?", part ? part : "?");
    }
    g_autofree char *stem = photo_stem(img->path);
    return g_strdup_printf("photo|%s", stem);
}

/* The footprint of a georeferenced image in its CRS: x0, y0, x1, y1. */
static gboolean footprint(const ClImage *img, double f[4])
{
    if (!img->geo || !img->geo->has_transform)
        return FALSE;
    const double *t = img->geo->transform;
    double xs[4], ys[4];
    const double cx[4] = { 0, img->width, 0, img->width },
                 cy[4] = { 0, 0, img->height, img->height };
    for (int k = 0; k < 4; k++) {
        xs[k] = t[0] + t[1] * cx[k] + t[2] * cy[k];
        ys[k] = t[3] + t[4] * cx[k] + t[5] * cy[k];
    }
    f[0] = MIN(MIN(xs[0], xs[1]), MIN(xs[2], xs[3]));
    f[2] = MAX(MAX(xs[0], xs[1]), MAX(xs[2], xs[3]));
    f[1] = MIN(MIN(ys[0], ys[1]), MIN(ys[2], ys[3]));
    f[3] = MAX(MAX(ys[0], ys[1]), MAX(ys[2], ys[3]));
    return f[2] > f[0] && f[3] > f[1];
}

/* Share of the smaller footprint that the two have in common. */
static double overlap(const double a[4], const double b[4])
{
    double w = MIN(a[2], b[2]) - MAX(a[0], b[0]), h = MIN(a[3], b[3]) - MAX(a[1], b[1]);
    if (w <= 0 || h <= 0)
        return 0;
    double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
    return w * h / MIN(aa, ab);
}

guint cl_sequence_group(const ClImage *const *images, guint n, guint *group_of)
{
    g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
    guint groups = 0;
    for (guint i = 0; i < n; i++) {
        guint g = G_MAXUINT;
        double fi[4], fk[4];
        char *key = NULL;
        if (footprint(images[i], fi)) {
            /* the same place: footprints in one CRS sharing most of their area */
            for (guint k = 0; k < i && g == G_MAXUINT; k++)
                if (footprint(images[k], fk) && images[k]->geo->epsg == images[i]->geo->epsg &&
                    overlap(fi, fk) > 0.5)
                    g = group_of[k];
        } else {
            key = group_key(images[i]);
            for (guint k = 0; k < i && g == G_MAXUINT; k++)
                if (g_strcmp0(g_ptr_array_index(keys, k), key) == 0)
                    g = group_of[k];
        }
        group_of[i] = g == G_MAXUINT ? groups++ : g;
        g_ptr_array_add(keys, key);
    }
    return groups;
}
