sacct --version
