sbatch --version
