# heldout_tables.R OUTDIR: writes the held-out tables of data/heldout (docs/RESULTS.md
# section 25) from R's mlbench package (Debian: r-base-core, r-cran-mlbench) as CSV
# with the features and a last column `label`. Factor columns become numbers, columns
# constant over the table are dropped, and so are rows with missing values.
library(mlbench)
args <- commandArgs(trailingOnly = TRUE)
dir <- if (length(args) > 0) args[1] else "."

write_table <- function(name, df, class) {
  y <- df[[class]]
  x <- df[, setdiff(names(df), class), drop = FALSE]
  for (n in names(x)) x[[n]] <- as.numeric(as.character(x[[n]]))
  x <- x[, sapply(x, function(v) sd(v, na.rm = TRUE) > 0), drop = FALSE]
  ok <- complete.cases(x)
  x <- x[ok, , drop = FALSE]
  x$label <- as.character(y[ok])
  f <- gzfile(file.path(dir, paste0(name, ".csv.gz")), "w")
  write.csv(x, f, row.names = FALSE, quote = FALSE)
  close(f)
  cat(sprintf("%s: %d rows, %d features, %d classes\n", name, nrow(x), ncol(x) - 1, length(unique(x$label))))
}

data(Glass); write_table("glass", Glass, "Type")
data(Ionosphere); write_table("ionosphere", Ionosphere, "Class")
data(Sonar); write_table("sonar", Sonar, "Class")
data(Vehicle); write_table("vehicle", Vehicle, "Class")
data(Satellite); write_table("satellite", Satellite, "classes")
