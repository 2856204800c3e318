sbatch --parsable --qos=fast --account=hpcb --partition=short --time=5 --job-name=qos_job --wrap='true'
