sbatch --parsable --time=abc --wrap='true'
