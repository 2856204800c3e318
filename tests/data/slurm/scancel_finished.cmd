scancel 7
