sbatch --parsable --partition=nosuchpart --wrap='true'
