/* sequence.c - several files, or one multi-frame/multi-page file, as one ordered sequence. */
#include "sequence.h"

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
            g_ptr_array_add(warnings,
                            g_strdup_printf("the sequence mixes patients: %s is patient %s, %s is "
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
            g_ptr_array_add(warnings,
                            g_strdup_printf("the sequence mixes modalities: %s and %s",
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
        g_autofree char *base = img->path ? g_path_get_basename(img->path)
                                          : g_strdup_printf("image %u", i + 1);
        for (guint f = 0; f < nf; f++) {
            ClSequenceItem *it = g_new0(ClSequenceItem, 1);
            it->image = img;
            it->frame = f;
            it->label = nf > 1 ? g_strdup_printf("%s [frame %u/%u]", base, f + 1, nf)
                               : g_strdup(base);
            g_ptr_array_add(seq->items, it);
        }
    }
    g_ptr_array_unref(seq->warnings);
    seq->warnings = cl_sequence_warnings((const ClImage *const *)seq->images->pdata, seq->images->len);
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
