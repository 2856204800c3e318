sbatch --parsable --account=nosuchacct --wrap='true'
