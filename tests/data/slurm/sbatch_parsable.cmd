sbatch --parsable --time=1 --job-name=timeout_job --wrap='sleep 300'
