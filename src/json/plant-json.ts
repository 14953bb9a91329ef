/** A plant as one JSON object with its id as an exact JSON integer, all digits (JSON.stringify cannot write a bigint). */
export function plantJson(plant: { readonly id: bigint; readonly name: string; readonly tag: string | null }): string {
  const tag = plant.tag === null ? '' : `,"tag":${JSON.stringify(plant.tag)}`;
  return `{"id":${plant.id},"name":${JSON.stringify(plant.name)}${tag}}`;
}
