/* geoexport.h - change maps on an input's grid: a GeoTIFF with the input raster's size, CRS and
 * geotransform (through GDAL), and the changed regions as a GeoPackage of polygons. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Writes width × height floats (row-major) as a one-band GeoTIFF on the grid of the raster at
 * grid_path (any file GDAL opens: its full size, its CRS as GDAL states it and its geotransform,
 * copied exactly). When width × height is not the grid's size (an image read at a reduced scale),
 * each grid pixel takes the value under its centre (nearest). as_mask: a Byte band of 1 where the
 * value is >= threshold, else 0; otherwise a Float32 band of the values. Written row by row (memory
 * of one row of the grid), into a temporary file renamed into place. A grid without
 * georeferencing gives a GeoTIFF without it (*georeferenced FALSE; may be NULL). */
gboolean cl_geo_write_geotiff(const char *out_path, const char *grid_path, const float *values,
                              guint width, guint height, gboolean as_mask, double threshold,
                              gboolean *georeferenced, GError **error);

/* The pixels of value 1 in the mask GeoTIFF at mask_path (8-connected regions) as polygons in a
 * GeoPackage layer "changed_regions" (the mask's CRS) with the fields id and area_m2: the
 * polygon's area in square metres (projected CRS: in its linear unit, converted; geographic: on
 * a Lambert equal-area projection about the polygon; no CRS: NULL). *n_regions gets the count. */
gboolean cl_geo_write_regions(const char *gpkg_path, const char *mask_path, guint *n_regions,
                              GError **error);

G_END_DECLS
