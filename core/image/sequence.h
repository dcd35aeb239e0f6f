/* sequence.h - several files (or one multi-frame/multi-page file) as one ordered sequence. */
#pragma once

#include "image/image.h"

G_BEGIN_DECLS

typedef struct {
    ClImage *image; /* shared by items of one file; owned by the sequence */
    guint frame;    /* frame within image */
    char *label;    /* "file.dcm", "file.dcm [frame 3]" */
} ClSequenceItem;

typedef struct {
    GPtrArray *images;   /* ClImage*, owned, in load order */
    GPtrArray *items;    /* ClSequenceItem*, owned, in sequence order */
    GPtrArray *warnings; /* char*, owned: mixed patients, mixed sizes, ... */
} ClSequence;

/* Opens paths as one sequence. DICOM files are ordered by acquisition date-time, else study
 * date-time, then instance number (a DICOM without dates goes after those with); other files
 * keep the order given. When formats are mixed, the DICOM files are sorted among the places
 * they were given in, and the other files keep theirs.
 * A single multi-frame or multi-page file yields one item per frame. Mixed patients or image
 * sizes add a warning; they are not refused. Any file that fails to load fails the whole call,
 * naming that file. */
ClSequence *cl_sequence_open(const char *const *paths, guint n_paths, const ClImageLimits *limits,
                             GError **error);
/* The sequence order of images (the rules above): order[k] is the index of the k-th image. */
void cl_sequence_order(const ClImage *const *images, guint n, guint *order);
/* The warnings (mixed patients, sizes, modalities) for images in this order: char*, caller
 * unrefs. */
GPtrArray *cl_sequence_warnings(const ClImage *const *images, guint n);
/* The files of one import, grouped the way they belong together: DICOM by patient, modality and
 * body part; GeoTIFF by footprint (the same place at a tenth of its size); other images by file
 * stem, trailing version words dropped ("site-before.png", "site_after.png", "site (2).png").
 * group_of[i] receives image i's group (0, 1, ... in order of first appearance); returns the
 * number of groups. */
guint cl_sequence_group(const ClImage *const *images, guint n, guint *group_of);

/* Builds a sequence from images already loaded (takes ownership of each). */
ClSequence *cl_sequence_new_from_images(ClImage **images, guint n_images);
void cl_sequence_free(ClSequence *seq);
static inline guint cl_sequence_length(const ClSequence *seq)
{
    return seq->items->len;
}
static inline const ClSequenceItem *cl_sequence_item(const ClSequence *seq, guint i)
{
    return (const ClSequenceItem *)g_ptr_array_index(seq->items, i);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClSequence, cl_sequence_free)

G_END_DECLS
