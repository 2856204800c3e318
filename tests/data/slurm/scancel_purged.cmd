scancel 6
