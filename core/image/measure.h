/* measure.h - measurements on an image in its own units: a distance between two points and the
 * statistics and area of a rectangle, in millimetres for a DICOM image with pixel spacing, in
 * metres for a raster in a projected CRS, else in pixels; values in modality units (the frame's
 * rescale applied). The app's measuring tools use them (docs/DESIGN.md §9). */
#pragma once

#include <glib.h>

#include "image/image.h"

G_BEGIN_DECLS

typedef enum {
    CL_MEASURE_PIXELS,
    CL_MEASURE_MM, /* DICOM PixelSpacing */
    CL_MEASURE_M,  /* a georeferenced raster in a projected CRS */
} ClMeasureUnit;

const char *cl_measure_unit_name(ClMeasureUnit u); /* "px", "mm", "m" */

/* The image's size of a pixel: *dx across a column step, *dy across a row step, in the unit
 * returned (1 × 1 pixels when the image says nothing usable, or a geographic CRS's degrees). */
ClMeasureUnit cl_measure_pixel_size(const ClImage *img, double *dx, double *dy);

/* The distance from (x0, y0) to (x1, y1), image pixel coordinates, in the returned unit. */
ClMeasureUnit cl_measure_length(const ClImage *img, double x0, double y0, double x1, double y1,
                                double *length);

typedef struct {
    guint64 n;                 /* pixels whose centre lies in the rectangle */
    double mean, sd, min, max; /* of the values in modality units (population SD): channel 0,
                                 * or the mean of R, G and B of a colour image */
    double area;               /* the rectangle's area: n pixels' worth, in unit² */
    ClMeasureUnit unit;
} ClMeasureRegion;

/* The pixels of `frame` whose centres lie in [x0, x1) × [y0, y1) (image pixel coordinates, in
 * any order; clamped to the image). FALSE when no pixel's centre is inside, or the frame has
 * no pixels (loaded header-only). */
gboolean cl_measure_region(const ClImage *img, guint frame, double x0, double y0, double x1,
                           double y1, ClMeasureRegion *out);

/* One line for the user: "12.4 mm", "3.20 m", "57.0 px" (lengths); "mean 41.3, SD 6.20 HU over
 * 1024 px, 37.5 mm²" (regions; areas of 10,000 m² and more also in ha). Newly allocated. */
char *cl_measure_length_text(ClMeasureUnit unit, double length);
/* An area in unit²: "37.5 mm²", "820 m²", "25000 m² (2.50 ha)" (ha from 10,000 m²); NULL for
 * pixels (no physical area). Newly allocated. */
char *cl_measure_area_text(ClMeasureUnit unit, double area);
/* The whole frame's area: width × height pixels of cl_measure_pixel_size. */
ClMeasureUnit cl_measure_image_area(const ClImage *img, double *area);
char *cl_measure_region_text(const ClImage *img, const ClMeasureRegion *r);

G_END_DECLS
