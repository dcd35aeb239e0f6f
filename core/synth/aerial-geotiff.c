/* aerial-geotiff.c - placeholder until written: the aerial task's GeoTIFF writer */
