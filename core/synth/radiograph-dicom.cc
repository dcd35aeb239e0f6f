// radiograph-dicom.cc - placeholder until written: the radiograph task's DICOM writer (DCMTK)
