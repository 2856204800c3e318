sbatch --parsable --job-name=dep_unknown_job --dependency=afterok:999999 --wrap='true'
