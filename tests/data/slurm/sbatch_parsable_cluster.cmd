sbatch --parsable --clusters=hpcbridge --job-name=cluster_job --wrap='true'
