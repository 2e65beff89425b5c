// GenerateImageFolder: a deterministic, ImageNet-like image folder made from
// real photos, for demos, tests and benchmarks.
//
// The folder is root/<wnid>/<wnid>_<index>.JPEG, as torchvision's ImageFolder
// expects. Each image is a random crop of one of a small set of source photos
// (by default the OpenCV sample images shipped by Debian's opencv-doc),
// resized, recoloured and lightly textured so that JPEG sizes resemble
// ImageNet's (about 100 KB on average with the default spec). Image i depends
// only on (seed, i, the sides, the qualities, the photos' contents): not on
// the thread count, the order or location of the photos, or num_images. All
// randomness comes from hdmlp/util/random.h, and pixels are produced with
// bit-exact integer arithmetic, so a seed gives the same bytes wherever the
// same OpenCV/libjpeg build encodes them.
//
// The call is idempotent and crash-safe. Every file is written under a hidden
// temporary name in its final folder and renamed into place, so a visible
// file is always complete. A manifest, root/.hdmlp_generated (a hidden file,
// so ImageFolder ignores it), records the spec and every file's size and is
// written last; when it matches the spec and every file is present, the call
// returns after a few stat()s. Otherwise files that are still valid for the
// spec are kept (image i does not depend on num_images, so growing a folder
// only adds files), missing ones are generated, and generated files that the
// spec no longer contains are removed. Only files named like generated ones,
// in a root that has a manifest, are ever removed: a real dataset or a
// user's file is left alone.
//
// Thread-safety: GenerateImageFolder may be called from any thread. Calls on
// different roots are independent; concurrent calls on one root (say one per
// rank on a shared file system) serialise on an advisory lock,
// root/.hdmlp_generated.lock, where the file system supports flock().
#ifndef HDMLP_TOOLS_IMAGE_FOLDER_GENERATOR_H_
#define HDMLP_TOOLS_IMAGE_FOLDER_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hdmlp {

struct ImageFolderSpec {
  std::string root;
  int num_images = 500;                 // total, spread round-robin over classes
  int num_classes = 10;
  uint64_t seed = 0;
  int min_side = 250, max_side = 500;   // each side drawn independently in [min,max]
  int min_quality = 85, max_quality = 95;
  std::vector<std::string> photos;      // empty -> FindDefaultPhotos()
  int threads = 0;                      // 0 -> std::thread::hardware_concurrency()
};

struct GeneratedFolder {
  int64_t files_written = 0;  // images encoded by this call
  int64_t files_kept = 0;     // images already present and valid
  int64_t total_bytes = 0;    // size of all num_images images
};

// Errors: a bad field -> InvalidArgumentError naming it; a photo that does not
// exist -> NotFoundError; no photo decodes to at least 200x200 ->
// InvalidArgumentError; root is a file -> NotADirectoryError; root or a file
// under it cannot be created or written -> IOError naming the path.
GeneratedFolder GenerateImageFolder(const ImageFolderSpec& spec);

// The *.jpg, *.jpeg and *.png files directly in $HDMLP_PHOTOS_DIR, or else in
// /usr/share/doc/opencv-doc/examples/data, sorted. They are not decoded here:
// GenerateImageFolder skips photos that fail to decode or are smaller than
// 200 pixels on a side. None found -> NotFoundError.
std::vector<std::string> FindDefaultPhotos();

// The layout, for callers that want to name files without generating them.
// Class c is "n%08d" of c * 1117: ImageNet-looking, and below every real
// ImageNet-1k wnid for up to 1289 classes, so the two cannot be confused.
std::string GeneratedClassName(int class_index);
// "<wnid>/<wnid>_<image_index, 6 digits>.JPEG"; image i is in class
// i % num_classes.
std::string GeneratedRelativePath(int image_index, int num_classes);

// The manifest's file name inside root.
extern const char kGeneratedManifestName[];

}  // namespace hdmlp

#endif  // HDMLP_TOOLS_IMAGE_FOLDER_GENERATOR_H_
