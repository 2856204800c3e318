sbatch --parsable --partition=short --time=10 --wrap='true'
