sbatch --job-name=plain_job --wrap='true'
