package mcp_test

import (
	"image"
	"image/color"
)

// tinyImage returns a 2×2 image.
func tinyImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 1, color.RGBA{B: 255, A: 255})
	return img
}
