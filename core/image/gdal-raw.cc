/* gdal-raw.cc - how many bytes a raw-layout GDAL raster (ENVI, EHdr, PAux, ...) needs against how
 * many its data file has: GDAL reads past the end of a cut file as zeros, without an error. */
#include <gdal_priv.h>

#include <algorithm>

#include "image/loaders.h"

extern "C" gboolean cl_gdal_raw_size(void *handle, guint64 *need, guint64 *have)
{
    GDALDataset *ds = GDALDataset::FromHandle(static_cast<GDALDatasetH>(handle));
    GDALDataset::RawBinaryLayout l;
    if (!ds || !ds->GetRawBinaryLayout(l) || l.osRawFilename.empty())
        return FALSE;
    const GIntBig w = ds->GetRasterXSize(), h = ds->GetRasterYSize(), n = ds->GetRasterCount();
    const GIntBig size = GDALGetDataTypeSizeBytes(l.eDataType);
    if (w <= 0 || h <= 0 || n <= 0 || size <= 0)
        return FALSE;
    /* the furthest sample from the image offset (a negative step, bottom-up rows, adds none) */
    double hi = 0;
    const double steps[3][2] = { { (double)l.nPixelOffset, (double)(w - 1) },
                                 { (double)l.nLineOffset, (double)(h - 1) },
                                 { (double)l.nBandOffset, (double)(n - 1) } };
    for (const auto &s : steps) {
        double d = s[0] * s[1];
        hi += std::max(d, 0.0);
    }
    VSIStatBufL st;
    if (VSIStatL(l.osRawFilename.c_str(), &st) != 0)
        return FALSE;
    *need = (guint64)((double)l.nImageOffset + hi + (double)size);
    *have = (guint64)st.st_size;
    return TRUE;
}
