sbatch --parsable --account=nosuchacct --qos=nosuchqos --job-name=noacct_exit4 --wrap='exit 4'
