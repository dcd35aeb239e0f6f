/* image.h - ClImage: decoded image frames kept in their original values, plus metadata. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define CL_IMAGE_ERROR (cl_image_error_quark())

typedef enum {
    CL_IMAGE_ERROR_IO,             /* the file cannot be opened or read */
    CL_IMAGE_ERROR_UNKNOWN_FORMAT, /* not a format ChangeLens reads */
    CL_IMAGE_ERROR_CORRUPT,        /* truncated or malformed data */
    CL_IMAGE_ERROR_UNSUPPORTED,    /* valid file, but a variant this build cannot decode */
    CL_IMAGE_ERROR_TOO_LARGE,      /* over the pixel budget or frame limit */
    CL_IMAGE_ERROR_INVALID,        /* bad argument (frame index out of range, ...) */
} ClImageError;

GQuark cl_image_error_quark(void);

typedef enum {
    CL_IMAGE_FORMAT_UNKNOWN = 0,
    CL_IMAGE_FORMAT_PNG,
    CL_IMAGE_FORMAT_TIFF,
    CL_IMAGE_FORMAT_DICOM,
    CL_IMAGE_FORMAT_JPEG,
    CL_IMAGE_FORMAT_WEBP,
    CL_IMAGE_FORMAT_BMP,
    CL_IMAGE_FORMAT_GIF,
    CL_IMAGE_FORMAT_GDAL, /* any other raster GDAL opens (metadata GDALDriver names the driver) */
} ClImageFormat;

typedef enum {
    CL_SAMPLE_UINT = 0, /* unsigned integers */
    CL_SAMPLE_INT,      /* two's-complement signed integers */
    CL_SAMPLE_FLOAT,    /* IEEE floating point */
} ClSampleFormat;

typedef enum {
    CL_LAYOUT_GREY = 0,   /* 1 channel */
    CL_LAYOUT_GREY_ALPHA, /* 2 channels: grey, alpha */
    CL_LAYOUT_RGB,        /* 3 channels */
    CL_LAYOUT_RGBA,       /* 4 channels */
    CL_LAYOUT_BANDS,      /* N bands without colour meaning (multispectral TIFF, ...) */
} ClChannelLayout;

/* One frame (DICOM frame, TIFF page, GIF first frame, ...).
 * data: (channels, height, width) planar float, each sample the value stored in the file
 * (after decompression, sign extension and masking to the stored bits; before any modality
 * LUT, window or inversion). Palette images are expanded to RGB(A) — the palette index is
 * not a measurement. 32-bit integer samples above 2^24 in magnitude are rounded to float. */
typedef struct {
    float *data;
    double rescale_slope;     /* modality LUT for this frame: value = stored*slope + intercept */
    double rescale_intercept; /* (1, 0) unless the file says otherwise */
} ClFrame;

typedef struct {
    double center; /* in modality units (after rescale) */
    double width;
    char *explanation; /* may be NULL */
} ClWindowPreset;

/* DICOM VOI LUT (PS3.3 C.11.2): maps modality values to display values. */
typedef struct {
    guint n_entries;    /* LUT Descriptor[0] (0 in the file means 65536) */
    double first_value; /* LUT Descriptor[1]: modality value mapped to entry 0 */
    guint bits;         /* LUT Descriptor[2]: output bits */
    guint16 *data;      /* n_entries values */
    char *explanation;  /* may be NULL */
} ClVoiLut;

/* Georeferencing of a GeoTIFF or a GDAL raster (NULL on an image without it). */
typedef struct {
    int epsg;                /* projected or geographic CRS code, 0 if unknown */
    char *crs_name;          /* citation or EPSG name, may be NULL */
    char *crs_wkt;           /* the CRS as GDAL states it (WKT), NULL from the TIFF loader */
    gboolean has_transform;  /* transform[] is valid */
    double transform[6];     /* x = t0 + col*t1 + row*t2; y = t3 + col*t4 + row*t5 (GDAL order), of
                          * the image's pixels (a raster read at 1/k scale: k × the file's) */
    gboolean pixel_is_point; /* raster type: PixelIsPoint (else PixelIsArea) */
    double pixel_size[2];    /* |x size|, |y size| in CRS units (from scale or transform) */
    double origin[2];        /* CRS coordinate of the upper-left corner of pixel (0,0) */
} ClGeoInfo;

typedef struct {
    char *key;   /* "PatientName", "Software", "GTModelTypeGeoKey", ... */
    char *value; /* printable UTF-8 */
} ClMetaEntry;

typedef struct {
    char *path; /* as given, may be NULL for memory buffers */
    ClImageFormat format;
    guint width, height;
    guint channels;
    ClChannelLayout layout;
    guint bits; /* significant bits per sample (DICOM BitsStored, PNG/TIFF bit depth) */
    guint
        bits_allocated; /* container bits per sample (DICOM BitsAllocated; else = bits rounded up) */
    ClSampleFormat sample_format;
    char *photometric; /* "MONOCHROME1", "MONOCHROME2", "RGB", "YBR_FULL_422", "PALETTE COLOR",
                            * "min-is-black", "grey", "palette", ... as the file states */
    GPtrArray *frames; /* ClFrame*, owned; length >= 1 */

    /* DICOM (NULL / 0 elsewhere) */
    char *transfer_syntax_uid;
    char *transfer_syntax; /* readable name, "JPEG-LS Lossless", "RLE Lossless", ... */
    char *modality;        /* "CR", "DX", "CT", "MR", ... */
    char *rescale_type;    /* "HU", "US", ... may be NULL */
    GArray *windows;       /* ClWindowPreset, owned (explanation freed with it) */
    GPtrArray *voi_luts;   /* ClVoiLut*, owned */
    gboolean has_pixel_spacing;
    double pixel_spacing[2]; /* mm: [0] between rows, [1] between columns (DICOM order) */
    char *patient_id, *patient_name;
    char *study_uid, *series_uid, *sop_instance_uid;
    char *study_datetime; /* ISO-ish "YYYYMMDDHHMMSS[.f]" as composed from DA+TM, may be NULL */
    char *acquisition_datetime; /* AcquisitionDateTime or AcquisitionDate+Time, may be NULL */
    int instance_number;        /* -1 if absent */

    /* GeoTIFF, GDAL */
    ClGeoInfo *geo;

    /* Everything else worth showing, in file order. */
    GPtrArray *metadata; /* ClMetaEntry*, owned */
} ClImage;

/* Limits checked before any pixel buffer is allocated. */
typedef struct {
    guint64 max_pixels; /* width*height*frames; default 2^28 */
    guint max_frames;   /* default 4096 */
    guint max_channels; /* default 1024 */
    /* TRUE: what the file says (sizes, samples, metadata) without its pixels, for `info`: a
     * loader that can (PNG) checks the pixel data row by row in a row's memory and leaves every
     * frame's data NULL; the others load as usual. Default FALSE. */
    gboolean header_only;
} ClImageLimits;

void cl_image_limits_init(ClImageLimits *limits);

/* Returns NULL (with error) if width*height*frames*channels breaks limits (NULL = defaults),
 * or if any dimension is 0. The message names the sizes and the limit. */
gboolean cl_image_check_limits(const ClImageLimits *limits, guint64 width, guint64 height,
                               guint64 frames, guint64 channels, GError **error);

/* Load a file; format detected from its content (not its name). Caller owns the result. */
ClImage *cl_image_load(const char *path, const ClImageLimits *limits, GError **error);

/* Same from memory; name (may be NULL) is used in messages. data must stay valid during the call. */
ClImage *cl_image_load_data(const guint8 *data, gsize len, const char *name,
                            const ClImageLimits *limits, GError **error);

ClImageFormat cl_image_detect_format(const guint8 *data, gsize len);
const char *cl_image_format_name(ClImageFormat format); /* "PNG", "TIFF", "DICOM", ... */
const char *cl_sample_format_name(ClSampleFormat fmt);  /* "uint", "int", "float" */
const char *cl_channel_layout_name(ClChannelLayout l);  /* "grey", "grey+alpha", "rgb", ... */

/* Building blocks for the loaders. */
ClImage *cl_image_new(ClImageFormat format);
void cl_image_free(ClImage *img);
/* Allocates n_frames zero-filled frames of width*height*channels floats (limits must have been
 * checked; uses g_try_malloc and fails with TOO_LARGE if memory is short). */
gboolean cl_image_alloc_frames(ClImage *img, guint n_frames, GError **error);
/* The longest metadata value kept (bytes); a longer one is cut and says how long it was. */
#define CL_IMAGE_META_MAX ((gsize)64 * 1024)
void cl_image_add_meta(ClImage *img, const char *key,
                       const char *value); /* copies; value made valid UTF-8, at most ~META_MAX */
const char *cl_image_get_meta(const ClImage *img, const char *key); /* first match or NULL */
void cl_image_add_window(ClImage *img, double center, double width, const char *explanation);

static inline float *cl_image_plane(const ClImage *img, guint frame, guint channel)
{
    ClFrame *f = (ClFrame *)g_ptr_array_index(img->frames, frame);
    return f->data + (gsize)channel * img->width * img->height;
}
static inline guint cl_image_n_frames(const ClImage *img)
{
    return img->frames->len;
}
static inline const ClFrame *cl_image_frame(const ClImage *img, guint frame)
{
    return (const ClFrame *)g_ptr_array_index(img->frames, frame);
}

/* Per-frame statistics over all samples of the frame, in modality units (rescale applied). */
typedef struct {
    double min, max, mean;
} ClFrameStats;
void cl_image_frame_stats(const ClImage *img, guint frame, ClFrameStats *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClImage, cl_image_free)

G_END_DECLS
